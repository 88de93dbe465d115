#include "server/tensor/tensor_proto.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tensor/label_limits.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

absl::Status Prefixed(absl::string_view field, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(field, ": ", status.message()));
}

}  // namespace

void ShardToProto(const ShardDomain& domain, DType dtype, pb::ShardInfo* out) {
  out->set_device_id(domain.device_id);
  for (const IndexRange& range : domain.box) {
    pb::IndexRange* r = out->add_ranges();
    r->set_begin(range.begin);
    r->set_end(range.end);
  }
  for (int64_t d : domain.shard_shape) out->add_shape(d);
  out->set_replica_id(domain.replica_id);
  out->set_size_bytes(BoxNumElements(domain.box) * DTypeSize(dtype));
}

void ShardingToProto(const Tensor& tensor, pb::Sharding* out) {
  const NamedSharding& sharding = tensor.sharding;
  out->set_mesh_id(tensor.mesh_id);
  for (const std::vector<std::string>& axes : sharding.spec().dims) {
    pb::DimSharding* dim = out->mutable_spec()->add_dims();
    for (const std::string& axis : axes) dim->add_axes(axis);
  }
  for (const std::string& axis : sharding.partial_axes()) out->add_partial_axes(axis);
  if (!sharding.partial_axes().empty()) {
    out->set_partial_op(static_cast<pb::ReduceOp>(tensor.partial_op));
  }
  out->set_mode(sharding.mode() == ShardingMode::kPadded ? pb::SHARDING_MODE_PADDED
                                                         : pb::SHARDING_MODE_EVEN);
}

void TensorToProto(const Tensor& tensor, pb::TensorInfo* out) {
  out->set_id(tensor.id);
  out->set_name(tensor.name);
  out->set_dtype(static_cast<pb::DType>(static_cast<int>(tensor.dtype)));
  for (int64_t d : tensor.shape) out->add_shape(d);
  ShardingToProto(tensor, out->mutable_sharding());
  const NamedSharding& sharding = tensor.sharding;
  pb::Placement* placement = out->mutable_placement();
  if (tensor.mesh_id.empty() && sharding.mesh().num_axes() == 0) {
    placement->set_device_id(sharding.mesh().device_ids().front());
  } else if (!tensor.mesh_id.empty() && sharding.spec().dims.empty() &&
             sharding.partial_axes().empty()) {
    placement->set_replicated_mesh_id(tensor.mesh_id);
  } else {
    *placement->mutable_sharding() = out->sharding();
  }
  for (const Shard& shard : tensor.shards)
    ShardToProto(shard.domain, tensor.dtype, out->add_shards());
  out->set_size_bytes(tensor.logical_bytes());
  out->set_device_bytes(tensor.device_bytes());
  out->set_owner(tensor.owner.label);
  out->set_tenant(tensor.owner.tenant);
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

absl::StatusOr<SourceHandling> SourceHandlingFromProto(int value) {
  switch (value) {
    case pb::SOURCE_HANDLING_UNSPECIFIED:
    case pb::SOURCE_HANDLING_KEEP:
      return SourceHandling::kKeep;
    case pb::SOURCE_HANDLING_DONATE:
      return SourceHandling::kDonate;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("source is ", value,
                       "; expected SOURCE_HANDLING_KEEP (1) or SOURCE_HANDLING_DONATE (2)"));
  }
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

}  // namespace placement::server
