#include "server/device/device_inventory.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

void AddUnique(std::vector<std::string>& values, const std::string& v) {
  if (v.empty()) return;
  if (std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
}

}  // namespace

void DeviceInventory::SetClusterDevices(std::vector<DeviceDescription> all,
                                        std::function<std::vector<DeviceState>()> remote_states) {
  cluster_devices_ = std::move(all);
  remote_states_ = std::move(remote_states);
}

const std::vector<DeviceDescription>& DeviceInventory::Devices() const {
  return cluster_devices_.empty() ? backend_->Devices() : cluster_devices_;
}

bool DeviceInventory::IsLocal(int64_t device_id) const {
  for (const auto& d : backend_->Devices()) {
    if (d.id == device_id) return true;
  }
  return false;
}

HardwareType DeviceInventory::hardware_type() const {
  const auto& devices = Devices();
  if (devices.empty()) return HardwareType::kUnknown;
  return DetectHardwareType(devices.front().platform, devices.front().device_kind);
}

std::vector<DeviceState> DeviceInventory::ListLocal() const {
  std::vector<DeviceState> out;
  for (const auto& d : backend_->Devices()) {
    out.push_back(DeviceState{d, backend_->MemoryInUse(d.id), backend_->MemoryCached(d.id),
                              backend_->MemoryCharged(d.id)});
  }
  return out;
}

std::vector<DeviceState> DeviceInventory::List() const {
  std::vector<DeviceState> remote;
  if (!cluster_devices_.empty() && remote_states_) remote = remote_states_();
  std::vector<DeviceState> out;
  for (const auto& d : Devices()) {
    if (IsLocal(d.id)) {
      out.push_back(DeviceState{d, backend_->MemoryInUse(d.id), backend_->MemoryCached(d.id),
                                backend_->MemoryCharged(d.id)});
      continue;
    }
    DeviceState state{d, 0, 0, 0};
    for (const DeviceState& r : remote) {
      if (r.description.id == d.id) {
        state.memory_in_use_bytes = r.memory_in_use_bytes;
        state.memory_cached_bytes = r.memory_cached_bytes;
        state.memory_charged_bytes = r.memory_charged_bytes;
      }
    }
    out.push_back(std::move(state));
  }
  return out;
}

DeviceInfoSummary DeviceInventory::Info() const {
  DeviceInfoSummary info;
  info.num_devices = num_devices();
  info.hardware_type = hardware_type();
  for (const auto& d : Devices()) {
    AddUnique(info.platforms, d.platform);
    AddUnique(info.device_kinds, d.device_kind);
    info.devices.push_back(d);
  }
  return info;
}

std::vector<int64_t> DeviceInventory::DeviceIds() const {
  std::vector<int64_t> ids;
  for (const auto& d : Devices()) ids.push_back(d.id);
  return ids;
}

int64_t DeviceInventory::default_device_id() const {
  const auto& devices = backend_->Devices();  // this daemon's own
  return devices.empty() ? 0 : devices.front().id;
}

absl::StatusOr<DeviceDescription> DeviceInventory::Find(int64_t device_id) const {
  for (const auto& d : Devices()) {
    if (d.id == device_id) return d;
  }
  const auto& devices = Devices();
  return absl::NotFoundError(
      absl::StrCat("device ", device_id, " does not exist; valid ids are ",
                   devices.empty() ? std::string("none")
                                   : absl::StrCat(devices.front().id, "..", devices.back().id)));
}

int64_t DeviceInventory::TotalMemoryInUse() const {
  int64_t total = 0;
  for (const auto& d : backend_->Devices()) total += backend_->MemoryInUse(d.id);
  return total;
}

}  // namespace placement::server
