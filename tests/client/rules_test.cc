// Client value types and the checks the client makes before any call:
// specs, placements, rules, byte counts, facade arguments. No daemon runs
// here: a Client dialled lazily at an unreachable address proves that a
// rejection happened locally (a call that reached the wire would be
// UNAVAILABLE instead).
#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"

namespace placement::client {
namespace {

using ::testing::HasSubstr;

TEST(ParseSpecTest, AcceptsCliAndPythonForms) {
  EXPECT_EQ(*ParseSpec("data,None"), (Spec{{"data"}, {}}));
  EXPECT_EQ(*ParseSpec("data"), (Spec{{"data"}}));
  EXPECT_EQ(*ParseSpec("None, model"), (Spec{{}, {"model"}}));
  EXPECT_EQ(*ParseSpec("(x,y),None"), (Spec{{"x", "y"}, {}}));
  EXPECT_EQ(*ParseSpec("P('data', None, ('x', 'y'))"), (Spec{{"data"}, {}, {"x", "y"}}));
  EXPECT_EQ(*ParseSpec("PartitionSpec(\"data\",)"), (Spec{{"data"}}));
  EXPECT_EQ(*ParseSpec(""), Spec{});
  EXPECT_EQ(*ParseSpec("P()"), Spec{});
  EXPECT_EQ(*ParseSpec("()"), (Spec{{}}));
}

TEST(ParseSpecTest, RejectsMalformedText) {
  for (const char* bad : {"(x,y", "x)", "((x))", "da ta", "(x,'')y"}) {
    auto spec = ParseSpec(bad);
    EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(spec.status().message(), HasSubstr(bad)) << bad;
  }
}

TEST(ParseSpecTest, SpecToStringRoundTrips) {
  Spec spec = {{"data"}, {}, {"x", "y"}};
  EXPECT_EQ(SpecToString(spec), "P('data', None, ('x', 'y'))");
  EXPECT_EQ(*ParseSpec(SpecToString(spec)), spec);
  EXPECT_EQ(SpecToString({}), "P()");
}

TEST(PlacementTest, BuildsPlacements) {
  EXPECT_EQ(Placement::Device(3).device_id(), 3);
  EXPECT_EQ(Placement::Replicated("m").mesh_id(), "m");
  EXPECT_TRUE(Placement::Replicated("m").is_replicated());
  Placement sharded = Placement::Sharded("m", {{"data"}, {}, {"x", "y"}});
  const Sharding& s = sharded.sharding();
  EXPECT_EQ(s.mesh_id, "m");
  ASSERT_EQ(s.spec.size(), 3u);
  EXPECT_THAT(s.spec[0], ::testing::ElementsAre("data"));
  EXPECT_TRUE(s.spec[1].empty());
  EXPECT_THAT(s.spec[2], ::testing::ElementsAre("x", "y"));
  EXPECT_EQ(s.mode, ShardingMode::kEven);
  EXPECT_EQ(sharded.Padded().sharding().mode, ShardingMode::kPadded);
  Placement partial = sharded.WithPartial({"y"}, ReduceOp::kMean);
  EXPECT_THAT(partial.sharding().partial_axes, ::testing::ElementsAre("y"));
  EXPECT_EQ(partial.sharding().partial_op, ReduceOp::kMean);
  // Padded / WithPartial leave non-sharded placements alone.
  EXPECT_EQ(Placement::Device(1).Padded().device_id(), 1);
  EXPECT_EQ(sharded.ToString(), "m P('data', None, ('x', 'y'))");
  EXPECT_EQ(Placement::Device(2).ToString(), "device 2");
}

TEST(PlacementTest, MeshRefCarriesAxes) {
  Mesh mesh;
  mesh.id = "m";
  mesh.axes = {{"data", 8}};
  MeshRef ref(mesh);
  EXPECT_EQ(ref.id(), "m");
  EXPECT_TRUE(ref.CheckAxis("data", "mesh_axis").ok());
  absl::Status missing = ref.CheckAxis("model", "mesh_axis");
  EXPECT_EQ(missing.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.message(), HasSubstr("mesh 'm' has no axis 'model' (axes: data)"));
  // By id only, axes are unknown here and the daemon decides.
  EXPECT_TRUE(MeshRef("m").CheckAxis("model", "mesh_axis").ok());
  EXPECT_EQ(MeshRef("m").CheckAxis("", "mesh_axis").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RuleTest, BuildsEveryRule) {
  EXPECT_TRUE(Rule().is_default());
  EXPECT_EQ(Rule(Placement::Device(2)).placement().device_id(), 2);
  Rule batch = Rule::ShardBatchDim("m", -1, "batch");
  EXPECT_EQ(batch.kind(), Rule::Kind::kShardBatchDim);
  EXPECT_EQ(batch.mesh_id(), "m");
  EXPECT_EQ(batch.batch_axis(), -1);
  EXPECT_EQ(batch.mesh_axis(), "batch");
  EXPECT_THAT(Rule::Replicate({0, 1}).device_ids(), ::testing::ElementsAre(0, 1));
  EXPECT_EQ(Rule::ReplicateOn("m").mesh_id(), "m");
  EXPECT_EQ(Rule::ModelState("m", "shard").param_sharding(), "shard");
  EXPECT_EQ(Rule::DataPartition("m", DataPartition::kReplicated).partition(),
            DataPartition::kReplicated);
  EXPECT_EQ(Rule::Replicate().ToString(), "replicated on all devices");
}

TEST(BytesTest, ExpectedBytesAndDescriptions) {
  EXPECT_EQ(*ExpectedBytes(DType::kF32, {32, 32}), 4096);
  EXPECT_EQ(*ExpectedBytes(DType::kBF16, {3}), 6);
  EXPECT_EQ(*ExpectedBytes(DType::kBool, {}), 1);
  EXPECT_EQ(ExpectedBytes(DType::kUnspecified, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpectedBytes(DType::kF32, {2, -3}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DescribeArray(DType::kF32, {32, 32}), "f32[32,32]");
  EXPECT_EQ(ElementSize(DType::kF64), 8);
  EXPECT_EQ(ElementSize(DType::kUnspecified), 0);
  std::vector<int32_t> v(6);
  HostArray a = HostArray::Of(v, {2, 3});
  EXPECT_EQ(a.dtype, DType::kI32);
  EXPECT_EQ(a.data.size(), 24u);
}

class OfflineClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClientOptions options;
    options.connect_timeout = absl::ZeroDuration();
    options.default_deadline = absl::Seconds(5);
    auto client = Client::Connect("127.0.0.1:1", options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }
  std::unique_ptr<Client> client_;
};

TEST_F(OfflineClientTest, UploadChecksByteCountFirst) {
  TensorClient tensors(*client_);
  std::vector<uint8_t> bytes(4000);
  auto info = tensors.Upload(HostArray{DType::kF32, {32, 32}, bytes});
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(info.status().message(), "expected 4096 bytes for f32[32,32], got 4000");

  auto batch = tensors.UploadBatch({{"labels", HostArray{DType::kI32, {8}, bytes}}});
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(batch.status().message(), HasSubstr("array 'labels': expected 32 bytes for i32[8]"));

  UploadOptions bad_chunk;
  bad_chunk.chunk_bytes = 0;
  EXPECT_EQ(tensors.StartUpload(DType::kF32, {1}, {}, bad_chunk).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(OfflineClientTest, UnreachableDaemonKeepsUnavailable) {
  TensorClient tensors(*client_);
  EXPECT_EQ(tensors.Describe("t-1").status().code(), absl::StatusCode::kUnavailable);
  std::vector<float> x(4);
  EXPECT_EQ(tensors.Upload(HostArray::Of(x, {4})).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(MeshClient(*client_).List().status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(OfflineClientTest, DataParallelValidatesArgumentsLocally) {
  DataParallel dp(*client_);
  TensorTree state = {{"w", "t-1"}};
  auto typo = dp.shard_model_state(state, "m", "shrad");
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(typo.status().message(), "param_sharding must be 'replicate' or 'shard', got 'shrad'");
  std::vector<float> w(4);
  EXPECT_EQ(dp.shard_model_state(HostTree{{"w", HostArray::Of(w, {4})}}, "m", "").status().code(),
            absl::StatusCode::kInvalidArgument);

  Mesh mesh;
  mesh.id = "m";
  mesh.axes = {{"data", 8}};
  auto sharding = dp.create_data_parallel_sharding(mesh);
  ASSERT_TRUE(sharding.ok()) << sharding.status();
  EXPECT_EQ(sharding->ToString(), "m P('data')");
  EXPECT_EQ(DataParallel::create_data_parallel_sharding_static(mesh, "batch").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DataParallel::create_data_parallel_sharding_static("", "data").status().code(),
            absl::StatusCode::kInvalidArgument);
  // Unknown axes are the daemon's to judge when only the id is known.
  EXPECT_TRUE(DataParallel::create_data_parallel_sharding_static("m", "batch").ok());

  // Empty trees need no call at all.
  auto empty = dp.shard_batch(TensorTree{}, *sharding);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
  auto replicated = dp.replicate_params(HostTree{}, mesh);
  ASSERT_TRUE(replicated.ok());
  EXPECT_TRUE(replicated->empty());
}

TEST_F(OfflineClientTest, PlaceTreeRejectsEmptyIds) {
  TensorClient tensors(*client_);
  auto placed = PlaceTree(tensors, TensorTree{{"a", ""}}, Placement::Device(0));
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(placed.status().message(), HasSubstr("tree['a']"));
}

}  // namespace
}  // namespace placement::client
