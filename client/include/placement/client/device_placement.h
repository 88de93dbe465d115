// DevicePlacement: a facade named after the seed's artifex DevicePlacement
// over a Client. Hardware-aware batch-size advice, device info, and the
// seed's placement calls (place_on_device, distribute_batch,
// replicate_across_devices, shard_batch_dim), which keep the seed's snake
// case names so Python code ports line by line.
//
// The placement calls take a tree of daemon tensors (TensorTree: key ->
// tensor id or TensorInfo) and return new tensors under the same keys
// (sources are kept, like JAX device_put, unless SourceHandling::kDonate),
// or a tree of host arrays (HostTree), uploaded in one stream straight into
// the placement. Every leaf is placed or none is.
//
//   auto placement = DevicePlacement::Create(*client);
//   placement->hardware_type();                  // HardwareType::kCpu
//   auto rec = placement->get_batch_size_recommendation();
//   auto [valid, message] = *placement->validate_batch_size(256);
//   auto on_dev = placement->place_on_device(batch);   // default device
//
// The seed's module-level convenience functions are free functions below:
// place_on_device(client, data), distribute_batch(client, data, sharding)
// and get_batch_size_recommendation(hardware_type).
//
// Thread-compatible; the Client it wraps must outlive it.
#ifndef PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_
#define PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/prefetch.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_tree.h"
#include "placement/client/types.h"

namespace placement::client {

class DevicePlacement {
 public:
  // DevicePlacement(default_device=None): reads the device list once
  // (hardware_type(), num_devices() are cached). `default_device` nullopt =
  // the daemon's first device. FAILED_PRECONDITION when the daemon has no
  // devices; NOT_FOUND for an unknown default_device.
  static absl::StatusOr<DevicePlacement> Create(
      const Client& client, std::optional<int64_t> default_device = std::nullopt);

  // The `hardware_type` property: the detected hardware (of the first
  // device). HardwareTypeName() gives the seed's string ("cpu", "h100").
  HardwareType hardware_type() const { return hardware_type_; }
  // The `num_devices` property.
  int64_t num_devices() const { return num_devices_; }
  int64_t default_device() const { return default_device_; }
  const Client& client() const { return *client_; }

  // get_batch_size_recommendation(hardware_type=None): the seed's table row
  // for `hardware_type`, or for the detected type when nullopt.
  absl::StatusOr<BatchSizeRecommendation> get_batch_size_recommendation(
      std::optional<HardwareType> hardware_type = std::nullopt) const {
    return client_->GetBatchSizeRecommendation(hardware_type);
  }
  // validate_batch_size(batch_size, warn_suboptimal=True) -> (valid, message),
  // with the seed's four messages verbatim (docs/seeds.md); the seed's False
  // is SuboptimalWarning::kSilent.
  absl::StatusOr<std::pair<bool, std::string>> validate_batch_size(
      int64_t batch_size, SuboptimalWarning warn_suboptimal = SuboptimalWarning::kWarn) const;
  // get_device_info(): num_devices, hardware_type, platforms, device_kinds,
  // devices.
  absl::StatusOr<DeviceInfo> get_device_info() const { return client_->GetDeviceInfo(); }

  // --- Placement (device_placement_tensors.cc) ---------------------------------
  // place_on_device(data, device=None): every leaf whole on `device`
  // (default_device() when nullopt).
  absl::StatusOr<TensorTree> place_on_device(const TensorTree& data,
                                             std::optional<int64_t> device = std::nullopt,
                                             SourceHandling source = SourceHandling::kKeep) const;
  absl::StatusOr<TensorTree> place_on_device(const HostTree& data,
                                             std::optional<int64_t> device = std::nullopt) const;
  // distribute_batch(data, sharding): every leaf with `sharding`; spec
  // entries beyond a leaf's rank must be None and are dropped.
  absl::StatusOr<TensorTree> distribute_batch(const TensorTree& data, const Placement& sharding,
                                              SourceHandling source = SourceHandling::kKeep) const;
  absl::StatusOr<TensorTree> distribute_batch(const HostTree& data,
                                              const Placement& sharding) const;
  // replicate_across_devices(data, devices=None): a one-axis mesh "replica"
  // over `devices` (all when nullopt or empty), every leaf fully replicated;
  // scalars included.
  absl::StatusOr<TensorTree> replicate_across_devices(
      const TensorTree& data, const std::optional<std::vector<int64_t>>& devices = std::nullopt,
      SourceHandling source = SourceHandling::kKeep) const;
  absl::StatusOr<TensorTree> replicate_across_devices(
      const HostTree& data,
      const std::optional<std::vector<int64_t>>& devices = std::nullopt) const;
  // shard_batch_dim(data, mesh, batch_axis=0, mesh_axis="data"), per leaf:
  // rank 0 or batch_axis >= rank -> replicated; negative batch_axis counts
  // from the end; an indivisible dimension is INVALID_ARGUMENT naming the
  // numbers. An unknown mesh_axis is INVALID_ARGUMENT before any call when
  // `mesh` carries its axes.
  absl::StatusOr<TensorTree> shard_batch_dim(const TensorTree& data, const MeshRef& mesh,
                                             int64_t batch_axis = 0,
                                             const std::string& mesh_axis = "data",
                                             SourceHandling source = SourceHandling::kKeep) const;
  absl::StatusOr<TensorTree> shard_batch_dim(const HostTree& data, const MeshRef& mesh,
                                             int64_t batch_axis = 0,
                                             const std::string& mesh_axis = "data") const;

  // --- Prefetch (prefetch_iterator.cc; see prefetch.h) --------------------------
  // prefetch_to_device(iterator, device=None, buffer_size=2): batches from
  // `source`, uploaded on a background thread, come back from Next() as
  // device tensors in order, each once, at most buffer_size staged.
  // `target` nullopt = whole batches on default_device().
  absl::StatusOr<std::unique_ptr<PrefetchIterator>> prefetch_to_device(
      BatchSource source, std::optional<Rule> target = std::nullopt,
      int buffer_size = kDefaultPrefetchBufferSize) const;

 private:
  DevicePlacement(const Client& client, HardwareType hardware_type, int64_t num_devices,
                  int64_t default_device)
      : client_(&client),
        hardware_type_(hardware_type),
        num_devices_(num_devices),
        default_device_(default_device) {}

  const Client* client_;  // never null; a pointer so that the facade is assignable
  HardwareType hardware_type_;
  int64_t num_devices_;
  int64_t default_device_;
};

// --- The seed's convenience functions -----------------------------------------

// place_on_device(data, device=None): every leaf whole on `device`, or on
// the daemon's first device when nullopt. Daemon tensors are copied (kept)
// like JAX device_put; host arrays are uploaded in one stream.
absl::StatusOr<TensorTree> place_on_device(const Client& client, const TensorTree& data,
                                           std::optional<int64_t> device = std::nullopt);
absl::StatusOr<TensorTree> place_on_device(const Client& client, const HostTree& data,
                                           std::optional<int64_t> device = std::nullopt);
// distribute_batch(data, sharding): every leaf with `sharding`; spec entries
// beyond a leaf's rank must be None and are dropped.
absl::StatusOr<TensorTree> distribute_batch(const Client& client, const TensorTree& data,
                                            const Placement& sharding);
absl::StatusOr<TensorTree> distribute_batch(const Client& client, const HostTree& data,
                                            const Placement& sharding);
// get_batch_size_recommendation(hardware_type): the seed's table row, from
// the library's own copy of the table (no daemon call). A type without a
// row (H200, B200) gets the UNKNOWN row's numbers with its own roofline.
BatchSizeRecommendation get_batch_size_recommendation(HardwareType hardware_type);
// get_batch_size_recommendation(hardware_type=None) for the daemon's
// detected hardware when nullopt.
absl::StatusOr<BatchSizeRecommendation> get_batch_size_recommendation(
    const Client& client, std::optional<HardwareType> hardware_type = std::nullopt);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_
