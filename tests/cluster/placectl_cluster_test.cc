// placectl against a 2-daemon cluster on loopback (4 CPU devices each): the
// status's cluster section and devices' NODE column, a global tensor put
// through one daemon (single controller) and read back per node with
// `tensor get --process`, and a multi-controller all-reduce: the same
// command on both daemons at once, meeting once and returning the same
// tensor. The real binary throughout.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/tools/placectl_fixture.h"  // .npy and JSON helpers

namespace placement::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

// f32[rows, cols] as np.save writes it.
std::string NpyF32(int rows, int cols, const std::vector<float>& values) {
  return Npy("<f4", absl::StrCat("(", rows, ", ", cols, ")"), Bytes(values));
}

class PlacectlClusterTest : public ::testing::Test, protected ClusterFixture {
 protected:
  void SetUp() override { StartCluster({2, 4}, {}, /*meshes=*/false); }

  CommandResult Run(int daemon, std::vector<std::string> args) {
    std::vector<std::string> argv = {PlacectlBinary(), "--target=" + cluster_->address(daemon)};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  TempDir dir_;
};

TEST_F(PlacectlClusterTest, StatusAndDevicesShowTheCluster) {
  auto status = Run(1, {"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_THAT(status.out, MatchesRegex("(.|\n)*cluster: +formed, epoch [0-9]+, 2 processes "
                                       "\\(this daemon: process 1\\)\n(.|\n)*"));
  EXPECT_THAT(status.out, HasSubstr("PROCESS  STATE  PEER ADDRESS"));
  EXPECT_THAT(status.out, MatchesRegex("(.|\n)*\n0 +alive +[^ ]+ +0-3 +1 *\n(.|\n)*"));
  EXPECT_THAT(status.out, MatchesRegex("(.|\n)*\n1 +alive +[^ ]+ +4-7 +1 *\n(.|\n)*"));
  auto json = Run(0, {"--json", "status"});
  EXPECT_THAT(json.out, HasSubstr("\"state\":\"CLUSTER_STATE_FORMED\""));
  auto devices = Run(0, {"devices"});
  ASSERT_EQ(devices.exit_code, 0) << devices.err;
  EXPECT_THAT(devices.out,
              MatchesRegex("(.|\n)*\n7 +" + TestPlatform() + " .* 1 *\n(.|\n)*"));  // NODE 1
}

TEST_F(PlacectlClusterTest, GlobalTensorPerNodeAndMultiControllerAllReduce) {
  ASSERT_EQ(Run(0, {"mesh", "create", "data=8", "--mesh_id=m"}).exit_code, 0);
  std::vector<float> x(8 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  WriteFile(Path("x.npy"), NpyF32(8, 3, x));
  // Single controller: daemon 0 takes the whole array; rows 4..7 go to node 1.
  auto put = Run(0, {"--json", "tensor", "put", Path("x.npy"), "--mesh=m", "--spec=data"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  const std::string id = JsonString(put.out, "id");
  ASSERT_FALSE(id.empty()) << put.out;
  auto describe = Run(1, {"tensor", "describe", id});
  ASSERT_EQ(describe.exit_code, 0) << describe.err;
  EXPECT_THAT(describe.out, MatchesRegex("(.|\n)*\n6 +1 +\\[6:7, 0:3\\](.|\n)*"));

  // Each node's part, asked on its own daemon (loadax global_to_host_array).
  for (int p = 0; p < 2; ++p) {
    std::string file = Path(absl::StrCat("node", p, ".npy"));
    auto get = Run(p, {"tensor", "get", id, file, absl::StrCat("--process=", p)});
    ASSERT_EQ(get.exit_code, 0) << get.err;
    EXPECT_THAT(get.out, HasSubstr("f32[4,3]"));
    std::vector<float> part = NpyFloats(ReadFile(file));
    EXPECT_EQ(part, std::vector<float>(x.begin() + 12 * p, x.begin() + 12 * (p + 1))) << p;
  }
  // Another node's part and another node's device, through this daemon.
  auto remote = Run(0, {"tensor", "get", id, Path("remote.npy"), "--process=1"});
  ASSERT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(NpyFloats(ReadFile(Path("remote.npy"))), std::vector<float>(x.begin() + 12, x.end()));
  auto device = Run(0, {"tensor", "get", id, Path("device.npy"), "--device=5"});
  ASSERT_EQ(device.exit_code, 0) << device.err;
  EXPECT_THAT(NpyFloats(ReadFile(Path("device.npy"))), ElementsAre(15, 16, 17));

  // Multi-controller: the same all-reduce on both daemons, at once.
  CommandResult results[2];
  std::vector<std::thread> callers;
  for (int p = 0; p < 2; ++p) {
    callers.emplace_back([&, p] {
      results[p] = Run(p, {"--json", "collective", "all-reduce", id, "--op=sum", "--axes=data",
                           "--controller=multi"});
    });
  }
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(results[0].exit_code, 0) << results[0].err;
  ASSERT_EQ(results[1].exit_code, 0) << results[1].err;
  const std::string reduced = JsonString(results[0].out, "id");
  EXPECT_EQ(JsonString(results[1].out, "id"), reduced);
  auto sum = Run(1, {"tensor", "get", reduced, Path("sum.npy")});
  ASSERT_EQ(sum.exit_code, 0) << sum.err;
  std::vector<float> expected(3, 0.0f);
  for (size_t i = 0; i < x.size(); ++i) expected[i % 3] += x[i];
  EXPECT_THAT(NpyFloats(ReadFile(Path("sum.npy"))),
              ElementsAre(expected[0], expected[1], expected[2]));

  // Single controller: one call drives both daemons, same values.
  auto single = Run(1, {"--json", "collective", "all-reduce", id, "--op=sum", "--axes=data"});
  ASSERT_EQ(single.exit_code, 0) << single.err;
  ASSERT_EQ(Run(0, {"tensor", "get", JsonString(single.out, "id"), Path("single.npy")}).exit_code,
            0);
  EXPECT_EQ(ReadFile(Path("single.npy")), ReadFile(Path("sum.npy")));
  EXPECT_EQ(Run(0, {"mesh", "rm", "m", "--force"}).exit_code, 0);
}

// The multi-controller upload: each node puts its own 4 rows under one
// --global_name; one tensor f32[8,3] commits with each node's rows on its
// devices. Disabled until the daemon implements ProcessLocal (issue 9; today
// it ignores the field and takes each node's 4 rows as the whole array:
// "([4,3]) cannot be sharded across 8 devices.").
TEST_F(PlacectlClusterTest, MultiControllerPutCommitsOneGlobalTensor) {
  ASSERT_EQ(Run(0, {"mesh", "create", "data=8", "--mesh_id=m"}).exit_code, 0);
  CommandResult results[2];
  std::vector<std::thread> callers;
  for (int p = 0; p < 2; ++p) {
    std::vector<float> rows(4 * 3);
    for (size_t i = 0; i < rows.size(); ++i) rows[i] = static_cast<float>(100 * p + i);
    std::string file = Path(absl::StrCat("rows", p, ".npy"));
    WriteFile(file, NpyF32(4, 3, rows));
    callers.emplace_back([&, p, file] {
      results[p] = Run(p, {"--json", "tensor", "put", file, "--rule=data_partition", "--mesh=m",
                           "--global_name=step-1/x", "--global_timeout=30s"});
    });
  }
  for (std::thread& t : callers) t.join();
  ASSERT_EQ(results[0].exit_code, 0) << results[0].err;
  ASSERT_EQ(results[1].exit_code, 0) << results[1].err;
  const std::string id = JsonString(results[0].out, "id");
  EXPECT_EQ(JsonString(results[1].out, "id"), id);
  EXPECT_THAT(results[0].out, HasSubstr("\"shape\":[\"8\",\"3\"]"));
  for (int p = 0; p < 2; ++p) {
    std::string file = Path(absl::StrCat("back", p, ".npy"));
    ASSERT_EQ(Run(p, {"tensor", "get", id, file, absl::StrCat("--process=", p)}).exit_code, 0);
    std::vector<float> back = NpyFloats(ReadFile(file));
    ASSERT_EQ(back.size(), 12u) << p;
    EXPECT_EQ(back[0], static_cast<float>(100 * p));
  }
  EXPECT_EQ(Run(0, {"mesh", "rm", "m", "--force"}).exit_code, 0);
}

}  // namespace
}  // namespace placement::testing
