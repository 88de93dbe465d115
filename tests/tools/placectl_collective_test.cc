// placectl collective all-reduce | all-reduce-batch | all-gather |
// reduce-scatter | broadcast against a real daemon with 8 CPU devices,
// checking the values that come back.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/placectl_fixture.h"

namespace placement::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class PlacectlCollectiveTest : public PlacectlFixture {
 protected:
  void SetUp() override {
    PlacectlFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(Run({"mesh", "create", "data=4", "--mesh_id=m"}).exit_code, 0);
  }
  // Device d of mesh m holds f32[3] {d+1, 10(d+1), 100(d+1)}; assembled as
  // a tensor partial over "data" (or with `flags` instead).
  std::string PerDevice(std::vector<std::string> flags = {"--mesh=m",
                                                          "--spec=", "--partial=data"}) {
    std::vector<std::string> assemble = {"tensor", "assemble", "3"};
    for (int d = 0; d < 4; ++d) {
      float v = static_cast<float>(d + 1);
      WriteFile(Path("p.npy"), Npy("<f4", "(3,)", Bytes(std::vector<float>{v, 10 * v, 100 * v})));
      assemble.push_back(
          RunForId({"tensor", "put", Path("p.npy"), "--device=" + std::to_string(d)}));
    }
    assemble.insert(assemble.end(), flags.begin(), flags.end());
    assemble.push_back("--donate");
    return RunForId(assemble);
  }
  std::vector<float> Values(const std::string& id, int device = -1) {
    std::vector<std::string> get = {"tensor", "get", id, Path("v.npy")};
    if (device >= 0) get.push_back("--device=" + std::to_string(device));
    auto r = Run(get);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return NpyFloats(ReadFile(Path("v.npy")));
  }
};

TEST_F(PlacectlCollectiveTest, AllReduceSumAndMean) {
  std::string partial = PerDevice();
  auto sum = Run({"collective", "all-reduce", partial, "--op=sum", "--name=total"});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  EXPECT_THAT(sum.out, HasSubstr("total"));
  std::string sum_id = RunForId({"collective", "all-reduce", partial});  // the partial op: sum
  EXPECT_THAT(Values(sum_id), ElementsAre(10, 100, 1000));
  EXPECT_THAT(Values(sum_id, 3), ElementsAre(10, 100, 1000));
  std::string mean =
      RunForId({"collective", "all-reduce", partial, "--op=MEAN", "--axes=data", "--donate"});
  EXPECT_THAT(Values(mean), ElementsAre(2.5, 25, 250));
  EXPECT_EQ(Run({"tensor", "describe", partial}).exit_code, 1);  // donated
  auto bad_axis = Run({"collective", "all-reduce", mean, "--axes=model"});
  EXPECT_EQ(bad_axis.exit_code, 1);
  EXPECT_THAT(bad_axis.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bad_axis.err, HasSubstr("model"));
  auto missing = Run({"collective", "all-reduce", "t-nope"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Run({"tensor", "rm", "--prefix=total"}).exit_code, 0);
  EXPECT_EQ(Run({"tensor", "rm", sum_id, mean}).exit_code, 0);
}

TEST_F(PlacectlCollectiveTest, AllReduceBatchReducesEveryTensorInOneCall) {
  std::string a = PerDevice();
  std::string b = PerDevice();
  auto r = Run({"--json", "collective", "all-reduce-batch", a, b, "--op=max", "--donate"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::vector<std::string> ids = JsonStrings(r.out, "id");
  ASSERT_EQ(ids.size(), 2u) << r.out;
  EXPECT_THAT(Values(ids[0]), ElementsAre(4, 40, 400));
  EXPECT_THAT(Values(ids[1]), ElementsAre(4, 40, 400));
  auto partly_missing = Run({"collective", "all-reduce-batch", ids[0], "t-nope"});
  EXPECT_EQ(partly_missing.exit_code, 1);
  EXPECT_THAT(partly_missing.err, HasSubstr("NOT_FOUND"));
  EXPECT_EQ(Run({"tensor", "rm", ids[0], ids[1]}).exit_code, 0);
}

TEST_F(PlacectlCollectiveTest, AllGatherReduceScatterBroadcast) {
  std::vector<float> x = {0, 1, 2, 3, 4, 5, 6, 7};
  WriteFile(Path("x.npy"), Npy("<f4", "(8,)", Bytes(x)));
  std::string sharded = RunForId({"tensor", "put", Path("x.npy"), "--mesh=m", "--spec=data"});
  std::string gathered = RunForId({"collective", "all-gather", sharded, "--dim=0"});
  auto described = Run({"tensor", "ls"});
  EXPECT_THAT(described.out, HasSubstr("replicated on m"));
  EXPECT_THAT(Values(gathered, 2), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  std::string negative = RunForId({"collective", "all-gather", sharded, "--dim", "-1"});
  EXPECT_THAT(Values(negative, 1), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  auto out_of_range = Run({"collective", "all-gather", sharded, "--dim=3"});
  EXPECT_EQ(out_of_range.exit_code, 1);
  EXPECT_THAT(out_of_range.err, HasSubstr("INVALID_ARGUMENT"));

  // reduce-scatter of f32[4] partial over data: sum, then one element each.
  std::vector<std::string> assemble = {"tensor", "assemble", "4"};
  for (int d = 0; d < 4; ++d) {
    float v = static_cast<float>(d);
    WriteFile(Path("q.npy"), Npy("<f4", "(4,)", Bytes(std::vector<float>{v, v, v, v + 1})));
    assemble.push_back(RunForId({"tensor", "put", Path("q.npy"), "--device=" + std::to_string(d)}));
  }
  assemble.insert(assemble.end(), {"--mesh=m", "--spec=", "--partial=data", "--donate"});
  std::string partial = RunForId(assemble);
  std::string scattered = RunForId({"collective", "reduce-scatter", partial, "--dim=0"});
  EXPECT_THAT(Values(scattered), ElementsAre(6, 6, 6, 10));
  EXPECT_THAT(Values(scattered, 3), ElementsAre(10));

  // broadcast: device 2's copy of a replicated tensor to every device.
  std::vector<std::string> copies = {"tensor", "assemble", "3"};
  for (int d = 0; d < 4; ++d) {
    float v = static_cast<float>(d);
    WriteFile(Path("r.npy"), Npy("<f4", "(3,)", Bytes(std::vector<float>{v, v, v})));
    copies.push_back(RunForId({"tensor", "put", Path("r.npy"), "--device=" + std::to_string(d)}));
  }
  copies.insert(copies.end(), {"--replicated=m", "--donate"});
  std::string differing = RunForId(copies);
  std::string broadcast = RunForId({"collective", "broadcast", differing, "--root=2", "--donate"});
  for (int d = 0; d < 4; ++d) EXPECT_THAT(Values(broadcast, d), ElementsAre(2, 2, 2)) << d;
  auto bad_root = Run({"collective", "broadcast", broadcast, "--root=7"});
  EXPECT_EQ(bad_root.exit_code, 1);
  EXPECT_THAT(bad_root.err, HasSubstr("7"));
  EXPECT_EQ(
      Run({"tensor", "rm", sharded, gathered, negative, partial, scattered, broadcast}).exit_code,
      0);
}

TEST_F(PlacectlCollectiveTest, MultiControllerOnALoneDaemonRunsAtOnce) {
  // One daemon is one controller: --controller=multi gives single's values.
  std::string partial = PerDevice();
  std::string single = RunForId({"collective", "all-reduce", partial, "--controller=single"});
  std::string multi = RunForId({"collective", "all-reduce", partial, "--controller=MULTI"});
  EXPECT_THAT(Values(multi), ElementsAre(10, 100, 1000));
  EXPECT_EQ(Values(multi), Values(single));
  auto batch = Run({"--json", "collective", "all-reduce-batch", partial, "--controller=multi"});
  ASSERT_EQ(batch.exit_code, 0) << batch.err;
  std::string batched = JsonString(batch.out, "id");
  EXPECT_THAT(Values(batched), ElementsAre(10, 100, 1000));
  EXPECT_EQ(Run({"tensor", "rm", partial, single, multi, batched}).exit_code, 0);
}

}  // namespace
}  // namespace placement::testing
