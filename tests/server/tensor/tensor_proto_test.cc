#include <string>

#include "gtest/gtest.h"
#include "server/service/from_proto.h"
#include "server/service/to_proto.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::PatternBytes;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;
namespace pb = placement::v1;

pb::TensorInfo Info(const Tensor& tensor) {
  pb::TensorInfo info;
  TensorToProto(tensor, &info);
  return info;
}

TEST(TensorProtoTest, PlacementAsRequestedIsReconstructed) {
  TestRig rig;
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}}, {}, "xy");
  auto single = UploadBytes(*rig.ops, DType::kI16, {2, 3}, DeviceRule(6), PatternBytes(12), 5, "s");
  ASSERT_TRUE(single.ok());
  pb::TensorInfo info = Info(**single);
  EXPECT_EQ(info.placement().device_id(), 6);
  EXPECT_EQ(info.name(), "s");
  EXPECT_EQ(info.dtype(), pb::DTYPE_I16);
  EXPECT_EQ(info.sharding().mesh_id(), "");
  EXPECT_EQ(info.size_bytes(), 12);
  ASSERT_EQ(info.shards_size(), 1);
  EXPECT_EQ(info.shards(0).size_bytes(), 12);

  auto replicated = UploadBytes(*rig.ops, DType::kU8, {3}, ReplicatedRule(xy), PatternBytes(3));
  ASSERT_TRUE(replicated.ok());
  info = Info(**replicated);
  EXPECT_EQ(info.placement().replicated_mesh_id(), "xy");
  EXPECT_EQ(info.device_bytes(), 24);
  EXPECT_EQ(info.shards(7).replica_id(), 7);

  auto sharded = UploadBytes(*rig.ops, DType::kF32, {7, 8},
                             ShardingRule(xy, {{"x"}, {"y"}}, pb::SHARDING_MODE_PADDED),
                             PatternBytes(7 * 8 * 4));
  ASSERT_TRUE(sharded.ok());
  info = Info(**sharded);
  ASSERT_TRUE(info.placement().has_sharding());
  EXPECT_EQ(info.placement().sharding().spec().dims_size(), 2);
  EXPECT_EQ(info.sharding().mode(), pb::SHARDING_MODE_PADDED);
  EXPECT_EQ(info.shards(4).ranges(0).begin(), 4);  // coords (1, 0)
  EXPECT_EQ(info.shards(4).ranges(0).end(), 7);
  EXPECT_EQ(info.shards(4).shape(0), 3);
  EXPECT_EQ(info.shards(4).size_bytes(), 3 * 2 * 4);

  pb::PlacementRule replicate_some;
  replicate_some.mutable_replicate()->add_device_ids(1);
  replicate_some.mutable_replicate()->add_device_ids(2);
  auto implicit = UploadBytes(*rig.ops, DType::kU8, {2}, replicate_some, PatternBytes(2));
  ASSERT_TRUE(implicit.ok());
  info = Info(**implicit);
  EXPECT_EQ(info.placement().sharding().mesh_id(), "");
  EXPECT_EQ(info.shards(1).device_id(), 2);
}

TEST(TensorProtoTest, RequestValidationNamesTheField) {
  google::protobuf::RepeatedField<int64_t> shape;
  shape.Add(4);
  shape.Add(-1);
  auto bad_shape = TensorSpecFromProto(pb::DTYPE_F32, shape, "", "", "arrays[2]");
  EXPECT_EQ(bad_shape.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_shape.status().message(), "arrays[2].shape: shape[1] is -1; dimensions must be >= 0");
  auto bad_dtype = TensorSpecFromProto(0, {}, "", "", "header");
  EXPECT_EQ(bad_dtype.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_dtype.status().message().rfind("header.dtype: ", 0), 0u) << bad_dtype.status();
  auto ok = TensorSpecFromProto(pb::DTYPE_BF16, {}, "n", "o", "header");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->dtype, DType::kBF16);
  EXPECT_TRUE(ok->shape.empty());

  EXPECT_EQ(*ChunkSizeFromProto(0), kDefaultChunkBytes);
  EXPECT_EQ(*ChunkSizeFromProto(kMaxChunkBytes), kMaxChunkBytes);
  EXPECT_EQ(ChunkSizeFromProto(kMaxChunkBytes + 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ChunkSizeFromProto(-1).status().code(), absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(*SourceHandlingFromProto(pb::SOURCE_HANDLING_UNSPECIFIED), SourceHandling::kKeep);
  EXPECT_EQ(*SourceHandlingFromProto(pb::SOURCE_HANDLING_DONATE), SourceHandling::kDonate);
  EXPECT_EQ(SourceHandlingFromProto(9).status().code(), absl::StatusCode::kInvalidArgument);

  pb::DownloadRequest request;
  EXPECT_EQ(DownloadSelectionFromProto(request).kind, DownloadSelectionKind::kWhole);
  request.set_process_index(3);
  DownloadSelection selection = DownloadSelectionFromProto(request);
  EXPECT_EQ(selection.kind, DownloadSelectionKind::kProcess);
  EXPECT_EQ(selection.process_index, 3);
}

}  // namespace
}  // namespace placement::server
