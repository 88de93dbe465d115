// gRPC front for placement.v1.RegionService: translates protos to
// RegionRegistry calls and back. No logic of its own. Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_REGION_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_REGION_HANDLER_H_

#include "placement/v1/region_service.grpc.pb.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"

namespace placement::server {

class RegionHandler final : public placement::v1::RegionService::CallbackService {
 public:
  // REQUIRES: regions and gate outlive the handler.
  RegionHandler(RegionRegistry* regions, CallGate* gate);
  ~RegionHandler() override;

  grpc::ServerUnaryReactor* RegisterRegion(
      grpc::CallbackServerContext* context, const placement::v1::RegisterRegionRequest* request,
      placement::v1::RegisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterRegion(
      grpc::CallbackServerContext* context, const placement::v1::UnregisterRegionRequest* request,
      placement::v1::UnregisterRegionResponse* response) override;
  grpc::ServerUnaryReactor* ListRegions(grpc::CallbackServerContext* context,
                                        const placement::v1::ListRegionsRequest* request,
                                        placement::v1::ListRegionsResponse* response) override;

 private:
  RegionRegistry* regions_;
  CallGate* gate_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_REGION_HANDLER_H_
