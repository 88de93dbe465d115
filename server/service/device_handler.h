// gRPC front for placement.v1.DeviceService: translates protos to
// DeviceInventory / hardware-table calls and back. No logic of its own.
//
// ListDevices shows a non-admin caller of an authenticating daemon its own
// tenant's bytes on each device (in use, charged; cached 0), not the
// daemon's: other tenants' usage is not its business.
#ifndef PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_

#include <functional>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "server/device/device_inventory.h"
#include "server/service/call_gate.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

class DeviceHandler final : public placement::v1::DeviceService::CallbackService {
 public:
  // Per-device bytes of one tenant's tensors (TensorStore::TenantDeviceUse).
  using TenantUseFn = std::function<absl::flat_hash_map<int64_t, TensorStore::DeviceUse>(
      const std::string& tenant)>;

  // `tenant_use` empty: every caller sees the daemon's figures.
  DeviceHandler(const DeviceInventory* inventory, CallGate* gate, TenantUseFn tenant_use = nullptr);
  ~DeviceHandler() override;

  grpc::ServerUnaryReactor* ListDevices(grpc::CallbackServerContext* context,
                                        const placement::v1::ListDevicesRequest* request,
                                        placement::v1::ListDevicesResponse* response) override;
  grpc::ServerUnaryReactor* GetDeviceInfo(grpc::CallbackServerContext* context,
                                          const placement::v1::GetDeviceInfoRequest* request,
                                          placement::v1::GetDeviceInfoResponse* response) override;
  grpc::ServerUnaryReactor* GetBatchSizeRecommendation(
      grpc::CallbackServerContext* context,
      const placement::v1::GetBatchSizeRecommendationRequest* request,
      placement::v1::GetBatchSizeRecommendationResponse* response) override;
  grpc::ServerUnaryReactor* ValidateBatchSize(
      grpc::CallbackServerContext* context, const placement::v1::ValidateBatchSizeRequest* request,
      placement::v1::ValidateBatchSizeResponse* response) override;

 private:
  const DeviceInventory* inventory_;
  CallGate* gate_;
  TenantUseFn tenant_use_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_
