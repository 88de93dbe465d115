// DeviceInventory: the seed's view of the devices (get_device_info,
// hardware_type, num_devices) over a DeviceBackend, with live memory
// accounting. In a cluster the view is global (JAX's jax.devices()): the
// devices of every daemon, in id order, each with its process index; this
// daemon allocates only on its own (the backend's), and the others' live
// accounting comes from `remote_states` (docs/cluster.md).
//
// Immutable after SetClusterDevices (called once, before serving) apart
// from the backend's counters; thread-safe.
#ifndef PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_
#define PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device/device_backend.h"

namespace placement::server {

struct DeviceState {
  DeviceDescription description;
  int64_t memory_in_use_bytes = 0;
  int64_t memory_cached_bytes = 0;   // freed blocks kept for reuse, within the budget
  int64_t memory_charged_bytes = 0;  // what the buffers in use cost the budget
};

struct DeviceInfoSummary {
  int64_t num_devices = 0;
  HardwareType hardware_type = HardwareType::kUnknown;
  std::vector<std::string> platforms;     // unique, first-seen order
  std::vector<std::string> device_kinds;  // unique, non-empty, first-seen order
  std::vector<DeviceDescription> devices;
};

class DeviceInventory {
 public:
  // REQUIRES: backend outlives the inventory.
  explicit DeviceInventory(DeviceBackend* backend) : backend_(backend) {}

  // Makes the view global: `all` is every device of the cluster (this
  // daemon's included, ids as the backend now has them), in id order;
  // `remote_states` returns the other daemons' devices with their live
  // accounting (it may return fewer when a daemon does not answer; those
  // are listed with zero accounting). REQUIRES: before serving.
  void SetClusterDevices(std::vector<DeviceDescription> all,
                         std::function<std::vector<DeviceState>()> remote_states);

  DeviceBackend* backend() const { return backend_; }
  int64_t num_devices() const { return static_cast<int64_t>(Devices().size()); }
  // Every device (the cluster's when set), in id order.
  const std::vector<DeviceDescription>& Devices() const;
  // Whether this daemon owns the device (allocates on it).
  bool IsLocal(int64_t device_id) const;
  // Detected from the first device (UNKNOWN when there are none).
  HardwareType hardware_type() const;
  // Devices in order with the bytes the daemon holds on each right now (in
  // a cluster: every daemon's, asking the others).
  std::vector<DeviceState> List() const;
  // This daemon's own devices only (never asks another daemon).
  std::vector<DeviceState> ListLocal() const;
  DeviceInfoSummary Info() const;
  // Global ids in topology order (process, then local index order).
  std::vector<int64_t> DeviceIds() const;
  // The seed's default device: this daemon's first one (JAX's
  // local_devices()[0]).
  int64_t default_device_id() const;
  // NOT_FOUND naming the id and the valid ids.
  absl::StatusOr<DeviceDescription> Find(int64_t device_id) const;
  // Bytes in use on this daemon's devices.
  int64_t TotalMemoryInUse() const;

 private:
  DeviceBackend* backend_;
  std::vector<DeviceDescription> cluster_devices_;  // empty: the backend's
  std::function<std::vector<DeviceState>()> remote_states_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_
