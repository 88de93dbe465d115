// gRPC front for placement.v1.DeviceService: translates protos to
// DeviceInventory / hardware-table calls and back. No logic of its own.
#ifndef PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_

#include "placement/v1/device_service.grpc.pb.h"
#include "server/device/device_inventory.h"
#include "server/service/call_gate.h"

namespace placement::server {

class DeviceHandler final : public placement::v1::DeviceService::CallbackService {
 public:
  DeviceHandler(const DeviceInventory* inventory, CallGate* gate)
      : inventory_(inventory), gate_(gate) {}

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
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_DEVICE_HANDLER_H_
