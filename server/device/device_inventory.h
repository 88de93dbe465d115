// DeviceInventory: the seed's view of the devices (get_device_info,
// hardware_type, num_devices) over a DeviceBackend, with live memory
// accounting. Immutable after construction apart from the backend's
// counters; thread-safe.
#ifndef PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_
#define PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/device/device_backend.h"

namespace placement::server {

struct DeviceState {
  DeviceDescription description;
  int64_t memory_in_use_bytes = 0;
  int64_t memory_cached_bytes = 0;  // freed blocks kept for reuse, within the budget
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

  DeviceBackend* backend() const { return backend_; }
  int64_t num_devices() const { return static_cast<int64_t>(backend_->Devices().size()); }
  // Detected from the first device (UNKNOWN when there are none).
  HardwareType hardware_type() const;
  // Devices in order with the bytes the daemon holds on each right now.
  std::vector<DeviceState> List() const;
  DeviceInfoSummary Info() const;
  // Global ids in topology order (local index order).
  std::vector<int64_t> DeviceIds() const;
  // The seed's default device: the first one.
  int64_t default_device_id() const;
  // NOT_FOUND naming the id and the valid ids.
  absl::StatusOr<DeviceDescription> Find(int64_t device_id) const;
  int64_t TotalMemoryInUse() const;

 private:
  DeviceBackend* backend_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_DEVICE_INVENTORY_H_
