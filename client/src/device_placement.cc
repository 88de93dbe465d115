// DevicePlacement's construction and hardware-aware calls, and the seed's
// get_batch_size_recommendation convenience function.
#include "placement/client/device_placement.h"

#include "absl/strings/str_cat.h"
#include "common/hardware.h"

namespace placement::client {

absl::StatusOr<DevicePlacement> DevicePlacement::Create(const Client& client,
                                                        std::optional<int64_t> default_device) {
  absl::StatusOr<DeviceInfo> info = client.GetDeviceInfo();
  if (!info.ok()) return info.status();
  if (info->num_devices == 0 || info->devices.empty()) {
    return absl::FailedPreconditionError("the daemon reports no devices");
  }
  int64_t device = default_device.value_or(info->devices.front().id);
  bool known = false;
  for (const DeviceInfo::Summary& d : info->devices) known |= d.id == device;
  if (!known) {
    return absl::NotFoundError(absl::StrCat("default device ", device, " does not exist"));
  }
  return DevicePlacement(client, info->hardware_type, info->num_devices, device);
}

absl::StatusOr<std::pair<bool, std::string>> DevicePlacement::validate_batch_size(
    int64_t batch_size, SuboptimalWarning warn_suboptimal) const {
  absl::StatusOr<BatchSizeValidation> response =
      client_->ValidateBatchSize(batch_size, warn_suboptimal);
  if (!response.ok()) return response.status();
  return std::make_pair(response->valid, std::move(response->message));
}

BatchSizeRecommendation get_batch_size_recommendation(HardwareType hardware_type) {
  placement::BatchSizeRecommendation row = placement::GetBatchSizeRecommendation(
      static_cast<placement::HardwareType>(static_cast<int>(hardware_type)));
  BatchSizeRecommendation out;
  out.hardware_type = static_cast<HardwareType>(static_cast<int>(row.hardware_type));
  out.min_batch_size = row.min_batch_size;
  out.optimal_batch_size = row.optimal_batch_size;
  out.critical_batch_size = row.critical_batch_size;
  out.max_memory_batch_size = row.max_memory_batch_size;
  out.notes = row.notes;
  if (row.roofline.has_value()) {
    out.roofline =
        Roofline{row.roofline->peak_flops_per_second, row.roofline->memory_bytes_per_second,
                 row.roofline->critical_batch_size, row.roofline->source};
  }
  return out;
}

absl::StatusOr<BatchSizeRecommendation> get_batch_size_recommendation(
    const Client& client, std::optional<HardwareType> hardware_type) {
  return client.GetBatchSizeRecommendation(hardware_type);
}

}  // namespace placement::client
