// The client's value types on the wire: what client/src/convert.cc sends for
// each Placement and Rule, and what it makes of the daemon's messages
// (including enum values this library does not know).
#include "client/src/convert.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/json.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using ::testing::ElementsAre;

TEST(ConvertTest, PlacementsBecomeWirePlacements) {
  EXPECT_EQ(ToProto(Placement::Device(3)).device_id(), 3);
  EXPECT_EQ(ToProto(Placement::Replicated("m")).replicated_mesh_id(), "m");
  EXPECT_EQ(ToProto(Placement()).target_case(), pb::Placement::TARGET_NOT_SET);
  Placement sharded = Placement::Sharded("m", {{"data"}, {}, {"x", "y"}});
  pb::Sharding s = ToProto(sharded).sharding();
  EXPECT_EQ(s.mesh_id(), "m");
  ASSERT_EQ(s.spec().dims_size(), 3);
  EXPECT_THAT(s.spec().dims(0).axes(), ElementsAre("data"));
  EXPECT_TRUE(s.spec().dims(1).axes().empty());
  EXPECT_THAT(s.spec().dims(2).axes(), ElementsAre("x", "y"));
  EXPECT_EQ(s.mode(), pb::SHARDING_MODE_UNSPECIFIED);
  EXPECT_EQ(ToProto(sharded.Padded()).sharding().mode(), pb::SHARDING_MODE_PADDED);
  pb::Sharding partial = ToProto(sharded.WithPartial({"y"}, ReduceOp::kMean)).sharding();
  EXPECT_THAT(partial.partial_axes(), ElementsAre("y"));
  EXPECT_EQ(partial.partial_op(), pb::REDUCE_OP_MEAN);
  // And back: the same value.
  EXPECT_EQ(FromProto(ToProto(sharded.Padded().WithPartial({"y"}))),
            sharded.Padded().WithPartial({"y"}));
  EXPECT_EQ(FromProto(ToProto(Placement::Device(5))), Placement::Device(5));
}

TEST(ConvertTest, RulesBecomeWireRules) {
  EXPECT_EQ(ToProto(Rule()).rule_case(), pb::PlacementRule::RULE_NOT_SET);
  EXPECT_EQ(ToProto(Rule(Placement::Device(2))).placement().device_id(), 2);
  pb::PlacementRule batch = ToProto(Rule::ShardBatchDim("m", -1, "batch"));
  EXPECT_EQ(batch.shard_batch_dim().mesh_id(), "m");
  EXPECT_EQ(batch.shard_batch_dim().batch_axis(), -1);
  EXPECT_TRUE(batch.shard_batch_dim().has_batch_axis());
  EXPECT_EQ(batch.shard_batch_dim().mesh_axis(), "batch");
  EXPECT_THAT(ToProto(Rule::Replicate({0, 1})).replicate().device_ids(), ElementsAre(0, 1));
  EXPECT_EQ(ToProto(Rule::ReplicateOn("m")).replicate().mesh_id(), "m");
  EXPECT_EQ(ToProto(Rule::ModelState("m", "shard")).model_state().param_sharding(), "shard");
  EXPECT_EQ(
      ToProto(Rule::DataPartition("m", DataPartition::kReplicated)).data_partition().partition(),
      pb::DATA_PARTITION_REPLICATED);
  EXPECT_EQ(ToProto(Rule::DataPartition("m")).data_partition().partition(),
            pb::DATA_PARTITION_FULL);
}

TEST(ConvertTest, TensorInfoFromTheWire) {
  pb::TensorInfo wire;
  wire.set_id("t-1");
  wire.set_name("w");
  wire.set_dtype(pb::DTYPE_BF16);
  wire.add_shape(8);
  wire.add_shape(3);
  wire.mutable_placement()->set_device_id(2);
  wire.mutable_sharding()->set_mesh_id("m");
  wire.mutable_sharding()->mutable_spec()->add_dims()->add_axes("data");
  pb::ShardInfo* shard = wire.add_shards();
  shard->set_device_id(2);
  auto* range = shard->add_ranges();
  range->set_begin(4);
  range->set_end(8);
  shard->add_shape(4);
  shard->set_replica_id(1);
  shard->set_size_bytes(24);
  wire.set_size_bytes(48);
  TensorInfo info = FromProto(wire);
  EXPECT_EQ(info.id, "t-1");
  EXPECT_EQ(info.dtype, DType::kBF16);
  EXPECT_THAT(info.shape, ElementsAre(8, 3));
  EXPECT_EQ(info.placement, Placement::Device(2));
  EXPECT_EQ(info.sharding.spec, (Spec{{"data"}}));
  ASSERT_EQ(info.shards.size(), 1u);
  EXPECT_EQ(info.shards[0].ranges, (std::vector<IndexRange>{{4, 8}}));
  EXPECT_EQ(info.shards[0].replica_id, 1);
  EXPECT_EQ(info.size_bytes, 48);
  // The JSON text goes through the same message.
  EXPECT_EQ(FromProto(ToProto(info)), info);
}

TEST(ConvertTest, UnknownEnumValuesBecomeUnknown) {
  EXPECT_EQ(FromProto(static_cast<pb::HardwareType>(99)), HardwareType::kUnknown);
  EXPECT_EQ(FromProto(pb::HARDWARE_TYPE_UNSPECIFIED), HardwareType::kUnknown);
  EXPECT_EQ(FromProto(pb::HARDWARE_TYPE_H200), HardwareType::kH200);
  EXPECT_EQ(FromProto(static_cast<pb::DType>(77)), DType::kUnspecified);
  EXPECT_EQ(FromProto(static_cast<pb::ReduceOp>(42)), ReduceOp::kUnspecified);
}

TEST(ConvertTest, DaemonStatusDurations) {
  pb::GetStatusResponse wire;
  wire.mutable_uptime()->set_seconds(90);
  wire.mutable_uptime()->set_nanos(500000000);
  wire.mutable_start_time()->set_seconds(1700000000);
  wire.set_serving(true);
  DaemonStatus status = FromProto(wire);
  EXPECT_EQ(status.uptime, absl::Milliseconds(90500));
  EXPECT_EQ(status.start_time, absl::FromUnixSeconds(1700000000));
  EXPECT_TRUE(status.serving);
  EXPECT_EQ(ToProto(status).uptime().nanos(), 500000000);
}

TEST(ConvertTest, StatusCarriesPrefetchStreams) {
  pb::GetStatusResponse wire;
  wire.set_num_prefetch_streams(3);
  EXPECT_EQ(FromProto(wire).num_prefetch_streams, 3);
  EXPECT_EQ(ToProto(FromProto(wire)).num_prefetch_streams(), 3);
}

TEST(NamesTest, ReduceOpsParseCaseInsensitively) {
  EXPECT_EQ(*ParseReduceOp("MEAN"), ReduceOp::kMean);
  EXPECT_EQ(*ParseReduceOp("prod"), ReduceOp::kProd);
  auto avg = ParseReduceOp("avg");
  EXPECT_EQ(avg.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(avg.status().message(),
            "Unsupported reduce_type: avg. Use 'sum', 'mean', 'max', 'min' or 'prod'.");
  EXPECT_EQ(ReduceOpName(ReduceOp::kMax), "max");
  EXPECT_EQ(*ParseHardwareType("HARDWARE_TYPE_H100"), HardwareType::kH100);
  EXPECT_EQ(HardwareTypeName(HardwareType::kTpuV5e), "tpu_v5e");
  EXPECT_EQ(*ParseDType("float32"), DType::kF32);
  EXPECT_EQ(DTypeName(DType::kBF16), "bf16");
  EXPECT_EQ(DTypeName(DType::kUnspecified), "unspecified");
}

TEST(JsonTest, GroupsBatchesAndStatsUseTheWireNames) {
  NamedTensor images{"images", {}};
  images.tensor.id = "t-9";
  images.tensor.dtype = DType::kU8;
  EXPECT_EQ(ToJson(std::vector<NamedTensor>{images}).rfind("{\"tensors\":[{\"key\":\"images\"", 0),
            0u);
  DeviceBatch batch;
  batch.sequence = 4;
  batch.tensors = {images};
  EXPECT_THAT(ToJson(batch), ::testing::HasSubstr("\"sequence\":\"4\""));
  EXPECT_THAT(ToJson(batch), ::testing::HasSubstr("\"dtype\":\"DTYPE_U8\""));
  PrefetchStats stats;
  stats.batches_staged = 7;
  stats.consumer_stall = absl::Milliseconds(1500);
  EXPECT_THAT(ToJson(stats), ::testing::HasSubstr("\"batches_staged\":\"7\""));
  EXPECT_THAT(ToJson(stats), ::testing::HasSubstr("\"consumer_stall\":\"1.500s\""));
}

TEST(JsonTest, ShardIsTheWireShardInfo) {
  ShardInfo shard;
  shard.device_id = 2;
  shard.ranges = {{0, 2}, {3, 6}};
  shard.shape = {2, 3};
  shard.size_bytes = 24;
  EXPECT_EQ(ToJson(shard),
            "{\"device_id\":\"2\",\"ranges\":[{\"begin\":\"0\",\"end\":\"2\"},"
            "{\"begin\":\"3\",\"end\":\"6\"}],\"shape\":[\"2\",\"3\"],\"replica_id\":\"0\","
            "\"size_bytes\":\"24\",\"process_index\":0}");
}

}  // namespace
}  // namespace placement::client
