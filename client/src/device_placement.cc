#include "placement/client/device_placement.h"

#include "absl/strings/str_cat.h"

namespace placement::client {

absl::StatusOr<DevicePlacement> DevicePlacement::Create(const Client* client,
                                                        std::optional<int64_t> default_device) {
  auto info = client->GetDeviceInfo();
  if (!info.ok()) return info.status();
  if (info->num_devices() == 0) {
    return absl::FailedPreconditionError("the daemon reports no devices");
  }
  int64_t device = default_device.value_or(info->devices(0).id());
  bool known = false;
  for (const auto& d : info->devices()) known |= d.id() == device;
  if (!known) {
    return absl::NotFoundError(absl::StrCat("default device ", device, " does not exist"));
  }
  return DevicePlacement(client, info->hardware_type_name(), info->num_devices(), device);
}

absl::StatusOr<std::pair<bool, std::string>> DevicePlacement::ValidateBatchSize(
    int64_t batch_size, bool warn_suboptimal) const {
  auto response = client_->ValidateBatchSize(batch_size, warn_suboptimal);
  if (!response.ok()) return response.status();
  return std::make_pair(response->valid(), response->message());
}

}  // namespace placement::client
