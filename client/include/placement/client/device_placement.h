// DevicePlacement: a facade named after the seed's artifex DevicePlacement
// over a Client. Hardware-aware batch-size advice and device info here;
// placement calls (place_on_device, distribute_batch, ...) are in
// placement.h's DevicePlacement extension once tensors exist.
//
// Thread-compatible; the Client it wraps must outlive it.
#ifndef PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_
#define PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "placement/client/client.h"

namespace placement::client {

class DevicePlacement {
 public:
  // Reads the device list once (hardware_type(), num_devices() are cached).
  static absl::StatusOr<DevicePlacement> Create(const Client* client,
                                                std::optional<int64_t> default_device = std::nullopt);

  // The detected hardware's seed string ("cpu", "h100", ...).
  const std::string& hardware_type() const { return hardware_type_; }
  int64_t num_devices() const { return num_devices_; }
  int64_t default_device() const { return default_device_; }
  const Client* client() const { return client_; }

  // get_batch_size_recommendation(hardware_type=None).
  absl::StatusOr<placement::v1::BatchSizeRecommendation> GetBatchSizeRecommendation(
      const std::string& hardware = "") const {
    return client_->GetBatchSizeRecommendation(hardware);
  }
  // validate_batch_size(batch_size, warn_suboptimal=True) -> (valid, message).
  absl::StatusOr<std::pair<bool, std::string>> ValidateBatchSize(int64_t batch_size,
                                                                 bool warn_suboptimal = true) const;
  // get_device_info().
  absl::StatusOr<placement::v1::GetDeviceInfoResponse> GetDeviceInfo() const {
    return client_->GetDeviceInfo();
  }

 private:
  DevicePlacement(const Client* client, std::string hardware_type, int64_t num_devices,
                  int64_t default_device)
      : client_(client),
        hardware_type_(std::move(hardware_type)),
        num_devices_(num_devices),
        default_device_(default_device) {}

  const Client* client_;
  std::string hardware_type_;
  int64_t num_devices_;
  int64_t default_device_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_DEVICE_PLACEMENT_H_
