#include "server/cluster/cluster_view.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

int32_t ClusterView::ProcessOf(int64_t device_id) const {
  for (const ProcessRecord& p : processes) {
    const int64_t count = static_cast<int64_t>(p.devices.size());
    if (count > 0 && device_id >= p.first_device_id && device_id < p.first_device_id + count) {
      return p.process_index;
    }
  }
  return -1;
}

bool ClusterView::IsAlive(int32_t process_index) const {
  return process_index >= 0 && process_index < static_cast<int32_t>(processes.size()) &&
         processes[process_index].state == ProcessState::kAlive;
}

std::vector<DeviceDescription> ClusterView::AllDevices() const {
  std::vector<DeviceDescription> out;
  for (const ProcessRecord& p : processes)
    out.insert(out.end(), p.devices.begin(), p.devices.end());
  return out;
}

std::string ClusterView::Describe(int32_t process_index) const {
  if (process_index < 0 || process_index >= static_cast<int32_t>(processes.size())) {
    return absl::StrCat("process ", process_index);
  }
  const ProcessRecord& p = processes[process_index];
  if (p.peer_address.empty()) return absl::StrCat("process ", process_index);
  return absl::StrCat("process ", process_index, " (", p.peer_address, ")");
}

}  // namespace placement::server
