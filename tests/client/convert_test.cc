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

TEST(ConvertTest, ControllerOnEveryCollectiveRequest) {
  EXPECT_EQ(ToProto(Controller::kSingle), pb::CONTROLLER_SINGLE);
  EXPECT_EQ(ToProto(Controller::kMulti), pb::CONTROLLER_MULTI);
  CollectiveOptions defaults;
  EXPECT_EQ(defaults.controller, Controller::kSingle);
  CollectiveOptions multi;
  multi.controller = Controller::kMulti;
  multi.axes = {"data"};
  multi.source = SourceHandling::kDonate;
  pb::AllReduceRequest all_reduce;
  ApplyCollectiveOptions(defaults, &all_reduce);
  EXPECT_EQ(all_reduce.controller(), pb::CONTROLLER_SINGLE);
  ApplyCollectiveOptions(multi, &all_reduce);
  EXPECT_EQ(all_reduce.controller(), pb::CONTROLLER_MULTI);
  EXPECT_THAT(all_reduce.axes(), ElementsAre("data"));
  EXPECT_EQ(all_reduce.source(), pb::SOURCE_HANDLING_DONATE);
  pb::AllReduceBatchRequest batch;
  ApplyCollectiveOptions(multi, &batch);
  EXPECT_EQ(batch.controller(), pb::CONTROLLER_MULTI);
  pb::AllGatherRequest gather;
  ApplyCollectiveOptions(multi, &gather);
  EXPECT_EQ(gather.controller(), pb::CONTROLLER_MULTI);
  pb::ReduceScatterRequest scatter;
  ApplyCollectiveOptions(multi, &scatter);
  EXPECT_EQ(scatter.controller(), pb::CONTROLLER_MULTI);
  pb::BroadcastRequest broadcast;
  ApplyCollectiveOptions(multi, &broadcast);
  EXPECT_EQ(broadcast.controller(), pb::CONTROLLER_MULTI);
}

TEST(ConvertTest, ProcessLocalOnTheUploadHeader) {
  UploadOptions options;
  options.owner = "trainer-1";
  pb::UploadHeader plain;
  ASSERT_TRUE(FillUploadHeader(DType::kF32, {4, 3}, Rule(), options, &plain).ok());
  EXPECT_FALSE(plain.has_process_local());
  EXPECT_FALSE(plain.has_rule());
  EXPECT_EQ(plain.owner(), "trainer-1");

  options.process_local = ProcessLocal{"batch", {16, 3}, absl::Seconds(90)};
  pb::UploadHeader header;
  ASSERT_TRUE(
      FillUploadHeader(DType::kF32, {4, 3}, Rule::DataPartition("m"), options, &header).ok());
  EXPECT_THAT(header.shape(), ElementsAre(4, 3));  // the LOCAL shape
  EXPECT_EQ(header.name(), "");
  EXPECT_EQ(header.rule().data_partition().mesh_id(), "m");
  ASSERT_TRUE(header.has_process_local());
  EXPECT_EQ(header.process_local().global_name(), "batch");
  EXPECT_THAT(header.process_local().global_shape(), ElementsAre(16, 3));
  EXPECT_EQ(header.process_local().timeout().seconds(), 90);

  // Defaults: inferred global shape, the daemon's timeout (field unset).
  pb::ProcessLocal inferred = ToProto(ProcessLocal{.global_name = "x"});
  EXPECT_TRUE(inferred.global_shape().empty());
  EXPECT_FALSE(inferred.has_timeout());
  EXPECT_EQ(ToProto(ProcessLocal{"x", {}, absl::Milliseconds(1500)}).timeout().nanos(), 500000000);
}

TEST(ConvertTest, ProcessLocalOnTheBatchHeader) {
  UploadOptions options;
  options.process_local = ProcessLocal{.global_name = "batch"};
  pb::BatchHeader header;
  ASSERT_TRUE(FillBatchHeader(Placement::Sharded("m", {{"data"}}), options, &header).ok());
  EXPECT_EQ(header.process_local().global_name(), "batch");
  EXPECT_EQ(header.rule().placement().sharding().mesh_id(), "m");
  EXPECT_EQ(header.name(), "");
  pb::BatchHeader plain;
  ASSERT_TRUE(FillBatchHeader(Rule(), UploadOptions{.name = "b"}, &plain).ok());
  EXPECT_FALSE(plain.has_process_local());
  EXPECT_EQ(plain.name(), "b");
}

TEST(ConvertTest, ProcessLocalIsCheckedBeforeAnyByte) {
  auto refused = [](ProcessLocal local, std::string name = "") {
    UploadOptions options;
    options.name = std::move(name);
    options.process_local = std::move(local);
    pb::UploadHeader header;
    absl::Status single = FillUploadHeader(DType::kF32, {2}, Rule(), options, &header);
    pb::BatchHeader batch;
    EXPECT_EQ(FillBatchHeader(Rule(), options, &batch), single);
    EXPECT_EQ(single.code(), absl::StatusCode::kInvalidArgument);
    return std::string(single.message());
  };
  EXPECT_EQ(refused(ProcessLocal{}), "process_local.global_name must not be empty");
  EXPECT_EQ(refused(ProcessLocal{.global_name = std::string(257, 'a')}),
            "process_local.global_name is 257 bytes; at most 256 are allowed");
  EXPECT_EQ(refused(ProcessLocal{"g", {8, -1}}),
            "process_local.global_shape[1] is -1; must be >= 0");
  EXPECT_EQ(refused(ProcessLocal{"g", {}, absl::Seconds(-1)}),
            "process_local.timeout is -1s; must be positive (zero: the default)");
  EXPECT_EQ(refused(ProcessLocal{.global_name = "g"}, "w"),
            "UploadOptions: name 'w' and process_local are both set; a process-local upload is "
            "named by process_local.global_name");
  EXPECT_TRUE(ValidateProcessLocal(ProcessLocal{.global_name = std::string(256, 'a')}).ok());
}

TEST(NamesTest, ControllersParseCaseInsensitively) {
  EXPECT_EQ(*ParseController("MULTI"), Controller::kMulti);
  EXPECT_EQ(*ParseController("single"), Controller::kSingle);
  EXPECT_EQ(ControllerName(Controller::kMulti), "multi");
  EXPECT_EQ(ParseController("both").status().message(),
            "unknown controller 'both'; accepted values: single, multi");
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

TEST(JsonTest, ShardingIsTheWireSharding) {
  Sharding sharding;
  sharding.mesh_id = "m";
  sharding.spec = {{"data"}, {}};
  sharding.partial_axes = {"model"};
  sharding.partial_op = ReduceOp::kSum;
  sharding.mode = ShardingMode::kPadded;
  const std::string json = ToJson(sharding);
  EXPECT_THAT(json, ::testing::HasSubstr("\"mesh_id\":\"m\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"partial_axes\":[\"model\"]"));
  EXPECT_THAT(json, ::testing::HasSubstr("\"partial_op\":\"REDUCE_OP_SUM\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"mode\":\"SHARDING_MODE_PADDED\""));
  EXPECT_THAT(json, ::testing::HasSubstr("\"data\""));
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
