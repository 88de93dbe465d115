// DevicePlacement's placement calls, and the seed's place_on_device /
// distribute_batch convenience functions: each maps to one Rule applied to
// every leaf, through Place (daemon tensors) or UploadBatch (host arrays).
#include "placement/client/device_placement.h"
#include "placement/client/tensors.h"

namespace placement::client {

absl::StatusOr<TensorTree> DevicePlacement::place_on_device(const TensorTree& data,
                                                            std::optional<int64_t> device,
                                                            SourceHandling source) const {
  return PlaceTree(TensorClient(*client_), data,
                   Placement::Device(device.value_or(default_device_)), source);
}

absl::StatusOr<TensorTree> DevicePlacement::place_on_device(const HostTree& data,
                                                            std::optional<int64_t> device) const {
  return UploadTree(TensorClient(*client_), data,
                    Placement::Device(device.value_or(default_device_)));
}

absl::StatusOr<TensorTree> DevicePlacement::distribute_batch(const TensorTree& data,
                                                             const Placement& sharding,
                                                             SourceHandling source) const {
  return PlaceTree(TensorClient(*client_), data, sharding, source);
}

absl::StatusOr<TensorTree> DevicePlacement::distribute_batch(const HostTree& data,
                                                             const Placement& sharding) const {
  return UploadTree(TensorClient(*client_), data, sharding);
}

absl::StatusOr<TensorTree> DevicePlacement::replicate_across_devices(
    const TensorTree& data, const std::optional<std::vector<int64_t>>& devices,
    SourceHandling source) const {
  return PlaceTree(TensorClient(*client_), data,
                   Rule::Replicate(devices.value_or(std::vector<int64_t>{})), source);
}

absl::StatusOr<TensorTree> DevicePlacement::replicate_across_devices(
    const HostTree& data, const std::optional<std::vector<int64_t>>& devices) const {
  return UploadTree(TensorClient(*client_), data,
                    Rule::Replicate(devices.value_or(std::vector<int64_t>{})));
}

absl::StatusOr<TensorTree> DevicePlacement::shard_batch_dim(const TensorTree& data,
                                                            const MeshRef& mesh, int64_t batch_axis,
                                                            const std::string& mesh_axis,
                                                            SourceHandling source) const {
  absl::Status axis_ok = mesh.CheckAxis(mesh_axis, "mesh_axis");
  if (!axis_ok.ok()) return axis_ok;
  return PlaceTree(TensorClient(*client_), data, Rule::ShardBatchDim(mesh, batch_axis, mesh_axis),
                   source);
}

absl::StatusOr<TensorTree> DevicePlacement::shard_batch_dim(const HostTree& data,
                                                            const MeshRef& mesh, int64_t batch_axis,
                                                            const std::string& mesh_axis) const {
  absl::Status axis_ok = mesh.CheckAxis(mesh_axis, "mesh_axis");
  if (!axis_ok.ok()) return axis_ok;
  return UploadTree(TensorClient(*client_), data, Rule::ShardBatchDim(mesh, batch_axis, mesh_axis));
}

}  // namespace placement::client

namespace placement::client {

absl::StatusOr<TensorTree> place_on_device(const Client& client, const TensorTree& data,
                                           std::optional<int64_t> device) {
  absl::StatusOr<DevicePlacement> placement = DevicePlacement::Create(client, device);
  if (!placement.ok()) return placement.status();
  return placement->place_on_device(data);
}

absl::StatusOr<TensorTree> place_on_device(const Client& client, const HostTree& data,
                                           std::optional<int64_t> device) {
  absl::StatusOr<DevicePlacement> placement = DevicePlacement::Create(client, device);
  if (!placement.ok()) return placement.status();
  return placement->place_on_device(data);
}

absl::StatusOr<TensorTree> distribute_batch(const Client& client, const TensorTree& data,
                                            const Placement& sharding) {
  return PlaceTree(TensorClient(client), data, sharding);
}

absl::StatusOr<TensorTree> distribute_batch(const Client& client, const HostTree& data,
                                            const Placement& sharding) {
  return UploadTree(TensorClient(client), data, sharding);
}

}  // namespace placement::client
