#include "server/service/region_handler.h"

#include "common/status_macros.h"
#include "server/service/unary.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

void RegionToProto(const RegionSnapshot& region, pb::RegionInfo* out) {
  out->set_region_id(region.id);
  out->set_name(region.name);
  out->set_size_bytes(region.size);
  out->set_session_id(region.session_id);
  out->set_tenant(region.tenant);
  out->set_pinned(region.pinned);
  out->set_owner_pid(region.owner_pid);
  out->set_owner_uid(region.owner_uid);
}

}  // namespace

grpc::ServerUnaryReactor* RegionHandler::RegisterRegion(grpc::CallbackServerContext* context,
                                                        const pb::RegisterRegionRequest* request,
                                                        pb::RegisterRegionResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    RegionHandle handle;
    if (request->handle_case() == pb::RegisterRegionRequest::kShmName) {
      handle.kind = RegionHandle::Kind::kShmName;
      handle.value = request->shm_name();
    } else {
      handle.kind = RegionHandle::Kind::kFdToken;
      handle.value = request->fd_token();
    }
    ASSIGN_OR_RETURN(RegionSnapshot region,
                     regions_->Register(caller, request->name(), request->size_bytes(), handle));
    RegionToProto(region, response->mutable_region());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* RegionHandler::UnregisterRegion(
    grpc::CallbackServerContext* context, const pb::UnregisterRegionRequest* request,
    pb::UnregisterRegionResponse* /*response*/) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    return regions_->Unregister(caller, request->region_id());
  });
}

grpc::ServerUnaryReactor* RegionHandler::ListRegions(grpc::CallbackServerContext* context,
                                                     const pb::ListRegionsRequest* /*request*/,
                                                     pb::ListRegionsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    for (const RegionSnapshot& region : regions_->List(caller)) {
      RegionToProto(region, response->add_regions());
    }
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
RegionHandler::RegionHandler(RegionRegistry* regions, CallGate* gate)
    : regions_(regions), gate_(gate) {}
RegionHandler::~RegionHandler() = default;

}  // namespace placement::server
