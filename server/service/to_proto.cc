#include "server/service/to_proto.h"

namespace placement::server {

namespace pb = placement::v1;

void ShardToProto(const ShardDomain& domain, DType dtype, int32_t process_index,
                  pb::ShardInfo* out) {
  out->set_device_id(domain.device_id);
  out->set_process_index(process_index);
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
  if (!sharding.partial_axes().empty() && tensor.partial_op.has_value()) {
    out->set_partial_op(ReduceOpToProto(*tensor.partial_op));
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
    ShardToProto(shard.domain, tensor.dtype, shard.process_index, out->add_shards());
  out->set_size_bytes(tensor.logical_bytes());
  out->set_device_bytes(tensor.global_device_bytes());
  out->set_owner(tensor.owner.label);
  out->set_tenant(tensor.owner.tenant);
}

// HardwareType's values are placement.v1.HardwareType's.
pb::HardwareType HardwareTypeToProto(HardwareType type) {
  return static_cast<pb::HardwareType>(type);
}

void DeviceToProto(const DeviceState& state, pb::Device* out) {
  const DeviceDescription& d = state.description;
  out->set_id(d.id);
  out->set_process_index(d.process_index);
  out->set_local_index(d.local_index);
  out->set_platform(d.platform);
  out->set_device_kind(d.device_kind);
  out->set_hardware_type(HardwareTypeToProto(d.hardware_type));
  out->set_memory_total_bytes(d.memory_total_bytes);
  out->set_memory_in_use_bytes(state.memory_in_use_bytes);
  out->set_memory_limit_bytes(d.memory_limit_bytes);
  out->set_memory_cached_bytes(state.memory_cached_bytes);
  out->set_memory_charged_bytes(state.memory_charged_bytes);
  out->set_compute_capability(d.compute_capability);
  out->set_pci_bus_id(d.pci_bus_id);
  out->set_numa_node(d.numa_node);
  out->set_multiprocessor_count(d.multiprocessor_count);
}

}  // namespace placement::server
