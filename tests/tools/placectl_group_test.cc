// placectl's grouped and multi-tensor commands against a real daemon with 8
// CPU devices: put-batch (the seed's distribute_batch), every placement rule,
// assemble / disassemble, get-shards, rm --prefix.
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/placectl_fixture.h"

namespace placement::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<float> Iota(size_t n, float start = 0) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

class PlacectlGroupTest : public PlacectlFixture {
 protected:
  void SetUp() override {
    PlacectlFixture::SetUp();
    if (HasFatalFailure()) return;
    ASSERT_EQ(Run({"mesh", "create", "data=4", "--mesh_id=m"}).exit_code, 0);
    ASSERT_EQ(Run({"mesh", "create", "data=2,model=4", "--mesh_id=grid"}).exit_code, 0);
  }
  // Writes an f32 .npy of `shape` holding 0, 1, 2, ...; returns its path.
  std::string WriteIota(const std::string& name, const std::string& shape_tuple, size_t n) {
    std::string path = Path(name);
    WriteFile(path, Npy("<f4", shape_tuple, Bytes(Iota(n))));
    return path;
  }
};

TEST_F(PlacectlGroupTest, PutBatchIsTheSeedsDistributeBatch) {
  // distribute_batch({"images": (8,4,4,3), "labels": (8,)}, P('data', None)).
  std::string images = WriteIota("images.npy", "(8, 4, 4, 3)", 8 * 4 * 4 * 3);
  std::vector<int32_t> label_values = {0, 1, 2, 3, 4, 5, 6, 7};
  WriteFile(Path("labels.npy"), Npy("<i4", "(8,)", Bytes(label_values)));
  auto put = Run({"tensor", "put-batch", "images=" + images, "labels=" + Path("labels.npy"),
                  "--mesh=m", "--spec=data,None", "--name=batch"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_THAT(put.out, HasSubstr("KEY     ID"));
  EXPECT_THAT(put.out, HasSubstr("batch/images"));
  EXPECT_THAT(put.out, HasSubstr("f32[8,4,4,3]  m P('data', None)"));
  EXPECT_THAT(put.out, HasSubstr("i32[8]        m P('data')"));

  auto listed = Run({"--json", "tensor", "ls", "--name_prefix=batch/"});
  std::vector<std::string> ids = JsonStrings(listed.out, "id");
  ASSERT_EQ(ids.size(), 2u) << listed.out;
  for (const std::string& id : ids) {
    auto back = Run({"tensor", "get", id, Path("back_" + id + ".npy")});
    ASSERT_EQ(back.exit_code, 0) << back.err;
  }
  std::string images_id = JsonString(listed.out, "name") == "batch/images" ? ids[0] : ids[1];
  EXPECT_EQ(ReadFile(Path("back_" + images_id + ".npy")), ReadFile(images));

  // Removal by name prefix takes both, and only them.
  std::string other = RunForId({"tensor", "put", images, "--name=keep"});
  auto rm = Run({"tensor", "rm", "--prefix=batch/"});
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  EXPECT_THAT(rm.out, HasSubstr("deleted 2 tensors"));
  EXPECT_THAT(Run({"tensor", "ls"}).out, HasSubstr(other));
  auto none = Run({"tensor", "rm", "--prefix=batch/"});
  EXPECT_EQ(none.exit_code, 0) << none.err;
  EXPECT_THAT(none.out, HasSubstr("deleted 0 tensors"));
  EXPECT_EQ(Run({"tensor", "rm", other}).exit_code, 0);
}

TEST_F(PlacectlGroupTest, PutBatchIsAllOrNothing) {
  std::string ok = WriteIota("ok.npy", "(8, 2)", 16);
  std::string odd = WriteIota("odd.npy", "(7,)", 7);
  auto r = Run({"tensor", "put-batch", "a=" + ok, "b=" + odd, "--mesh=m", "--spec=data"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(r.err, HasSubstr("7"));
  EXPECT_THAT(Run({"--json", "tensor", "ls"}).out, Not(HasSubstr("\"id\"")));
  auto missing = Run({"tensor", "put-batch", "a=" + ok, "b=" + Path("missing.npy")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("NOT_FOUND: cannot open"));
}

TEST_F(PlacectlGroupTest, EveryPlacementRule) {
  std::string x = WriteIota("x.npy", "(8, 6)", 48);
  struct Case {
    std::vector<std::string> flags;
    std::string placement;
    int shards;
  };
  const Case cases[] = {
      {{"--device=5"}, "device 5", 1},
      {{"--mesh=grid", "--spec=model,data"}, "grid P('model', 'data')", 8},
      {{"--mesh=grid"}, "replicated on grid", 8},
      {{"--replicated=m"}, "replicated on m", 4},
      {{"--rule=shard_batch_dim", "--mesh=grid", "--mesh_axis=model"}, "grid P('model')", 8},
      {{"--rule=shard_batch_dim", "--mesh=grid", "--batch_axis=-1"}, "grid P(None, 'data')", 8},
      {{"--rule=replicate", "--devices=2,6"}, " P() ", 2},
      {{"--rule=replicate", "--mesh=m"}, "replicated on m", 4},
      {{"--rule=model_state", "--mesh=grid", "--param_sharding=shard"}, "grid P('data')", 8},
      {{"--rule=model_state", "--mesh=grid"}, "replicated on grid", 8},
      {{"--rule=data_partition", "--mesh=grid"}, "grid P(('data', 'model'))", 8},
      {{"--rule=data_partition", "--mesh=grid", "--partition=replicated"}, "replicated on grid", 8},
  };
  for (const Case& c : cases) {
    std::vector<std::string> put = {"--json", "tensor", "put", x};
    put.insert(put.end(), c.flags.begin(), c.flags.end());
    auto r = Run(put);
    std::string what = ::testing::PrintToString(c.flags);
    ASSERT_EQ(r.exit_code, 0) << what << ": " << r.err;
    std::string id = JsonString(r.out, "id");
    auto table = Run({"tensor", "ls"});
    EXPECT_THAT(table.out, HasSubstr(c.placement)) << what << "\n" << table.out;
    EXPECT_EQ(JsonStrings(Run({"--json", "tensor", "describe", id}).out, "replica_id").size(),
              static_cast<size_t>(c.shards))
        << what;
    // The same rule through place, from a tensor on device 0.
    std::string src = RunForId({"tensor", "put", x, "--device=0"});
    std::vector<std::string> place = {"--json", "tensor", "place", src, "--donate"};
    place.insert(place.end(), c.flags.begin(), c.flags.end());
    auto placed = Run(place);
    ASSERT_EQ(placed.exit_code, 0) << what << ": " << placed.err;
    std::string moved = JsonString(placed.out, "id");
    ASSERT_EQ(Run({"tensor", "get", moved, Path("moved.npy")}).exit_code, 0);
    EXPECT_EQ(ReadFile(Path("moved.npy")), ReadFile(x)) << what;
    EXPECT_EQ(Run({"tensor", "rm", id, moved}).exit_code, 0);
  }
  auto unknown_mesh = Run({"tensor", "put", x, "--rule=shard_batch_dim", "--mesh=nope"});
  EXPECT_EQ(unknown_mesh.exit_code, 1);
  EXPECT_THAT(unknown_mesh.err, HasSubstr("NOT_FOUND"));
  auto bad_axis =
      Run({"tensor", "put", x, "--rule=shard_batch_dim", "--mesh=m", "--mesh_axis=batch"});
  EXPECT_EQ(bad_axis.exit_code, 1);
  EXPECT_THAT(bad_axis.err, HasSubstr("INVALID_ARGUMENT"));
  EXPECT_THAT(bad_axis.err, HasSubstr("batch"));
}

TEST_F(PlacectlGroupTest, PlaceSeveralTensorsAtOnce) {
  std::string x = WriteIota("x.npy", "(8, 6)", 48);
  std::string a = RunForId({"tensor", "put", x, "--device=0"});
  std::string b = RunForId({"tensor", "put", x, "--device=1"});
  auto placed = Run({"--json", "tensor", "place", a, b, "--replicated=m", "--donate"});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  std::vector<std::string> ids;
  for (const std::string& id : JsonStrings(placed.out, "id")) ids.push_back(id);
  ASSERT_EQ(ids.size(), 2u) << placed.out;
  EXPECT_EQ(Run({"tensor", "describe", a}).exit_code, 1);
  auto named = Run({"tensor", "place", ids[0], ids[1], "--device=2", "--name=x"});
  EXPECT_EQ(named.exit_code, 2);
  EXPECT_THAT(named.err, HasSubstr("--name names a single result"));
  EXPECT_EQ(Run({"tensor", "rm", ids[0], ids[1]}).exit_code, 0);
}

TEST_F(PlacectlGroupTest, GetShardsWritesOneFilePerDistinctShard) {
  std::string x = WriteIota("x.npy", "(8, 6)", 48);
  std::string id = RunForId({"tensor", "put", x, "--mesh=grid", "--spec=data"});
  // P('data') on data=2 x model=4: two distinct shards (rows 0:4 and 4:8),
  // each held by 4 devices; replica 0 of each is on devices 0 and 4.
  auto shards = Run({"tensor", "get-shards", id, Path("shards")});
  ASSERT_EQ(shards.exit_code, 0) << shards.err;
  EXPECT_THAT(shards.out, HasSubstr("[0:4, 0:6]"));
  EXPECT_THAT(shards.out, HasSubstr("[4:8, 0:6]"));
  std::vector<float> all = Iota(48);
  EXPECT_EQ(NpyFloats(ReadFile(Path("shards/device_0.npy"))),
            std::vector<float>(all.begin(), all.begin() + 24));
  EXPECT_EQ(NpyFloats(ReadFile(Path("shards/device_4.npy"))),
            std::vector<float>(all.begin() + 24, all.end()));
  EXPECT_EQ(ReadFile(Path("shards/device_1.npy")), "");  // a replica: not written

  auto some = Run({"--json", "tensor", "get-shards", id, Path("some"), "--devices=5"});
  ASSERT_EQ(some.exit_code, 0) << some.err;
  EXPECT_THAT(JsonStrings(some.out, "device_id"), ElementsAre("5"));
  EXPECT_THAT(some.out, HasSubstr("\"path\":\"" + Path("some/device_5.npy") + "\""));
  EXPECT_EQ(NpyFloats(ReadFile(Path("some/device_5.npy"))),
            std::vector<float>(all.begin() + 24, all.end()));
  auto absent = Run({"tensor", "get-shards", id, Path("none"), "--devices=9"});
  EXPECT_EQ(absent.exit_code, 1);
  EXPECT_THAT(absent.err, HasSubstr("has no shard on device 9"));
  EXPECT_EQ(Run({"tensor", "rm", id}).exit_code, 0);
}

TEST_F(PlacectlGroupTest, AssembleAndDisassemble) {
  // Four single-device blocks of f32[2,3], assembled into f32[8,3] over m.
  std::vector<std::string> parts;
  std::vector<float> whole;
  for (int d = 0; d < 4; ++d) {
    std::vector<float> block = Iota(6, static_cast<float>(6 * d));
    whole.insert(whole.end(), block.begin(), block.end());
    WriteFile(Path("block.npy"), Npy("<f4", "(2, 3)", Bytes(block)));
    parts.push_back(
        RunForId({"tensor", "put", Path("block.npy"), "--device=" + std::to_string(d)}));
  }
  std::vector<std::string> assemble = {"--json", "tensor", "assemble", "8,3"};
  assemble.insert(assemble.end(), parts.rbegin(), parts.rend());  // any order
  assemble.insert(assemble.end(), {"--mesh=m", "--spec=data", "--donate", "--name=whole"});
  auto assembled = Run(assemble);
  ASSERT_EQ(assembled.exit_code, 0) << assembled.err;
  std::string id = JsonString(assembled.out, "id");
  EXPECT_EQ(JsonString(assembled.out, "name"), "whole");
  ASSERT_EQ(Run({"tensor", "get", id, Path("whole.npy")}).exit_code, 0);
  EXPECT_EQ(NpyFloats(ReadFile(Path("whole.npy"))), whole);
  EXPECT_EQ(Run({"tensor", "describe", parts[0]}).exit_code, 1);  // donated

  auto split = Run({"--json", "tensor", "disassemble", id, "--donate"});
  ASSERT_EQ(split.exit_code, 0) << split.err;
  std::vector<std::string> pieces = JsonStrings(split.out, "id");
  ASSERT_EQ(pieces.size(), 4u) << split.out;
  ASSERT_EQ(Run({"tensor", "get", pieces[2], Path("piece.npy")}).exit_code, 0);
  EXPECT_EQ(NpyFloats(ReadFile(Path("piece.npy"))),
            std::vector<float>(whole.begin() + 12, whole.begin() + 18));
  EXPECT_EQ(Run({"tensor", "describe", id}).exit_code, 1);  // donated

  auto wrong = Run({"tensor", "assemble", "8,3", pieces[0], "--mesh=m", "--spec=data"});
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("INVALID_ARGUMENT"));
  std::vector<std::string> rm = {"tensor", "rm"};
  rm.insert(rm.end(), pieces.begin(), pieces.end());
  EXPECT_EQ(Run(rm).exit_code, 0);
}

}  // namespace
}  // namespace placement::testing
