#include "server/service/from_proto.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tensor/label_limits.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

absl::Status Prefixed(absl::string_view field, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

absl::StatusOr<ShardingMode> ModeFromProto(int value) {
  switch (value) {
    case pb::SHARDING_MODE_UNSPECIFIED:
    case pb::SHARDING_MODE_EVEN:
      return ShardingMode::kEven;
    case pb::SHARDING_MODE_PADDED:
      return ShardingMode::kPadded;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sharding.mode is ", value,
                       "; expected SHARDING_MODE_EVEN (1) or SHARDING_MODE_PADDED (2)"));
  }
}

}  // namespace

MeshPreset OneAxisPresetFromProto(MeshPresetKind kind, const pb::OneAxisPreset& proto) {
  MeshPreset preset;
  preset.kind = kind;
  if (proto.has_num_devices()) preset.num_devices = proto.num_devices();
  preset.axis_name = proto.axis_name();
  return preset;
}

MeshPreset HybridPresetFromProto(const pb::HybridPreset& proto) {
  MeshPreset preset;
  preset.kind = MeshPresetKind::kHybrid;
  if (proto.has_data_parallel_size()) preset.data_parallel_size = proto.data_parallel_size();
  if (proto.has_model_parallel_size()) preset.model_parallel_size = proto.model_parallel_size();
  preset.data_axis = proto.data_axis();
  preset.model_axis = proto.model_axis();
  return preset;
}

absl::StatusOr<ShardingRequest> ShardingFromProto(const pb::Sharding& sharding) {
  ShardingRequest out;
  out.mesh_id = sharding.mesh_id();
  for (const pb::DimSharding& dim : sharding.spec().dims()) {
    out.spec.dims.emplace_back(dim.axes().begin(), dim.axes().end());
  }
  out.partial_axes.assign(sharding.partial_axes().begin(), sharding.partial_axes().end());
  ASSIGN_OR_RETURN(out.mode, ModeFromProto(sharding.mode()));
  if (!out.partial_axes.empty()) {
    int value = sharding.partial_op();
    if (value == pb::REDUCE_OP_UNSPECIFIED) value = pb::REDUCE_OP_SUM;
    if (!pb::ReduceOp_IsValid(value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharding.partial_op is ", value, "; expected a ReduceOp value (1..5)"));
    }
    ASSIGN_OR_RETURN(out.partial_op, ReduceOpFromProtoValue(value));
  }
  return out;
}

absl::StatusOr<TensorPlacement> PlacementFromProto(const pb::Placement& placement) {
  switch (placement.target_case()) {
    case pb::Placement::kDeviceId:
      return TensorPlacement(OnDevice{placement.device_id()});
    case pb::Placement::kSharding: {
      ASSIGN_OR_RETURN(ShardingRequest sharding, ShardingFromProto(placement.sharding()));
      return TensorPlacement(std::move(sharding));
    }
    case pb::Placement::kReplicatedMeshId:
      return TensorPlacement(ReplicatedOnMesh{placement.replicated_mesh_id()});
    case pb::Placement::TARGET_NOT_SET:
      break;
  }
  return TensorPlacement();
}

absl::StatusOr<PlacementRule> PlacementRuleFromProto(const pb::PlacementRule& rule) {
  switch (rule.rule_case()) {
    case pb::PlacementRule::kPlacement: {
      ASSIGN_OR_RETURN(TensorPlacement placement, PlacementFromProto(rule.placement()));
      return PlacementRule(std::move(placement));
    }
    case pb::PlacementRule::kShardBatchDim: {
      const pb::ShardBatchDimRule& r = rule.shard_batch_dim();
      ShardBatchDimRule out{r.mesh_id(), std::nullopt, r.mesh_axis()};
      if (r.has_batch_axis()) out.batch_axis = r.batch_axis();
      return PlacementRule(std::move(out));
    }
    case pb::PlacementRule::kReplicate: {
      const pb::ReplicateRule& r = rule.replicate();
      return PlacementRule(ReplicateRule{
          r.mesh_id(), std::vector<int64_t>(r.device_ids().begin(), r.device_ids().end())});
    }
    case pb::PlacementRule::kModelState:
      return PlacementRule(
          ModelStateRule{rule.model_state().mesh_id(), rule.model_state().param_sharding()});
    case pb::PlacementRule::kDataPartition: {
      const pb::DataPartitionRule& r = rule.data_partition();
      switch (r.partition()) {
        case pb::DATA_PARTITION_UNSPECIFIED:
        case pb::DATA_PARTITION_FULL:
          return PlacementRule(DataPartitionRule{r.mesh_id(), DataPartition::kFull});
        case pb::DATA_PARTITION_REPLICATED:
          return PlacementRule(DataPartitionRule{r.mesh_id(), DataPartition::kReplicated});
        default:
          return absl::InvalidArgumentError(absl::StrCat("Unsupported partition: ", r.partition()));
      }
    }
    case pb::PlacementRule::RULE_NOT_SET:
      break;
  }
  return PlacementRule();
}

absl::StatusOr<Shape> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& shape,
                                     absl::string_view field) {
  Shape out(shape.begin(), shape.end());
  // Byte-size overflow is checked with the dtype; here only the dimensions.
  if (absl::Status status = ValidateShape(out, DType::kU8); !status.ok()) {
    return Prefixed(field, status);
  }
  return out;
}

absl::StatusOr<TensorSpec> TensorSpecFromProto(
    int dtype, const google::protobuf::RepeatedField<int64_t>& shape, std::string name,
    std::string owner, absl::string_view field) {
  TensorSpec spec;
  absl::StatusOr<DType> parsed = DTypeFromProtoValue(dtype);
  if (!parsed.ok()) return Prefixed(absl::StrCat(field, ".dtype"), parsed.status());
  spec.dtype = *parsed;
  spec.shape.assign(shape.begin(), shape.end());
  if (absl::Status status = ValidateShape(spec.shape, spec.dtype); !status.ok()) {
    return Prefixed(absl::StrCat(field, ".shape"), status);
  }
  if (absl::Status s = CheckLength(absl::StrCat(field, ".name"), name, kMaxTensorNameLength);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLength(absl::StrCat(field, ".owner"), owner, kMaxOwnerLength);
      !s.ok()) {
    return s;
  }
  spec.name = std::move(name);
  spec.owner = std::move(owner);
  return spec;
}

DownloadSelection DownloadSelectionFromProto(const pb::DownloadRequest& request) {
  DownloadSelection selection;
  switch (request.selection_case()) {
    case pb::DownloadRequest::kDeviceId:
      selection.kind = DownloadSelectionKind::kDevice;
      selection.device_id = request.device_id();
      break;
    case pb::DownloadRequest::kDevices:
      selection.kind = DownloadSelectionKind::kDeviceSet;
      selection.device_ids.assign(request.devices().device_ids().begin(),
                                  request.devices().device_ids().end());
      break;
    case pb::DownloadRequest::kProcessIndex:
      selection.kind = DownloadSelectionKind::kProcess;
      selection.process_index = request.process_index();
      break;
    case pb::DownloadRequest::kWhole:
    case pb::DownloadRequest::SELECTION_NOT_SET:
      selection.kind = DownloadSelectionKind::kWhole;
      break;
  }
  return selection;
}

absl::StatusOr<int64_t> ChunkSizeFromProto(int64_t chunk_size_bytes) {
  if (chunk_size_bytes == 0) return kDefaultChunkBytes;
  if (chunk_size_bytes < 0 || chunk_size_bytes > kMaxChunkBytes) {
    return absl::InvalidArgumentError(absl::StrCat("chunk_size_bytes is ", chunk_size_bytes,
                                                   "; it must be in [1, ", kMaxChunkBytes,
                                                   "] (0 = ", kDefaultChunkBytes, ")"));
  }
  return chunk_size_bytes;
}

absl::StatusOr<PrefetchConfig> PrefetchConfigFromProto(const pb::PrefetchOpen& open) {
  RETURN_IF_ERROR(CheckLength("open.name", open.name(), kMaxTensorNameLength));
  // Each staged batch is device memory plus its record; a stream may not
  // ask the daemon to hold an unbounded number of them.
  if (open.buffer_size() < 0 || open.buffer_size() > kMaxPrefetchBufferSize) {
    return absl::InvalidArgumentError(absl::StrCat("open.buffer_size is ", open.buffer_size(),
                                                   "; must be in [1, ", kMaxPrefetchBufferSize,
                                                   "] (0 selects the default 2)"));
  }
  PrefetchConfig config;
  config.buffer_size = open.buffer_size() == 0 ? 2 : open.buffer_size();
  absl::StatusOr<PlacementRule> rule = PlacementRuleFromProto(open.rule());
  if (!rule.ok()) return Prefixed("open.rule", rule.status());
  config.rule = *std::move(rule);
  config.name = open.name();
  config.auto_release = open.auto_release();
  return config;
}

PrefetchBatchHeader BatchHeaderFromProto(const pb::BatchHeader& header) {
  PrefetchBatchHeader out;
  out.name = header.name();
  out.owner = header.owner();
  if (absl::Status s = CheckLength("batch.name", header.name(), kMaxTensorNameLength); !s.ok()) {
    out.arrays = std::move(s);
    return out;
  }
  if (absl::Status s = CheckLength("batch.owner", header.owner(), kMaxOwnerLength); !s.ok()) {
    out.arrays = std::move(s);
    return out;
  }
  std::vector<BatchArraySpec> arrays;
  for (int i = 0; i < header.arrays_size(); ++i) {
    const pb::ArrayHeader& array = header.arrays(i);
    absl::StatusOr<TensorSpec> spec =
        TensorSpecFromProto(array.dtype(), array.shape(), "", "", absl::StrCat("arrays[", i, "]"));
    if (!spec.ok()) {
      out.arrays = absl::Status(spec.status().code(), absl::StrCat("array '", array.key(),
                                                                   "': ", spec.status().message()));
      return out;
    }
    arrays.push_back(BatchArraySpec{array.key(), spec->dtype, std::move(spec->shape)});
  }
  absl::StatusOr<PlacementRule> rule = PlacementRuleFromProto(header.rule());
  if (!rule.ok()) {
    out.arrays = Prefixed("batch.rule", rule.status());
    return out;
  }
  out.rule = *std::move(rule);
  out.arrays = std::move(arrays);
  return out;
}

}  // namespace placement::server

namespace placement::server {

absl::StatusOr<ProcessLocalRequest> ProcessLocalFromProto(const placement::v1::ProcessLocal& proto,
                                                          const std::string& tenant) {
  if (proto.global_name().empty() || proto.global_name().size() > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "process_local.global_name is ", proto.global_name().size(), " bytes; it must be 1..256"));
  }
  ProcessLocalRequest out;
  out.global_name = proto.global_name();
  out.tenant = tenant;
  const absl::Duration timeout =
      absl::Seconds(proto.timeout().seconds()) + absl::Nanoseconds(proto.timeout().nanos());
  if (timeout < absl::ZeroDuration() || timeout > absl::Hours(1)) {
    return absl::InvalidArgumentError(absl::StrCat("process_local.timeout is ",
                                                   absl::FormatDuration(timeout),
                                                   "; it must be in [0, 1h] (0 = 60s)"));
  }
  out.timeout = timeout == absl::ZeroDuration() ? absl::Seconds(60) : timeout;
  return out;
}

}  // namespace placement::server
