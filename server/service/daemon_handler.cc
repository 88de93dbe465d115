#include "server/service/daemon_handler.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/peer/cluster_proto.h"
#include "server/service/unary.h"

namespace placement::server {
namespace {

placement::v1::StreamKind StreamKindToProto(StreamKind kind) {
  switch (kind) {
    case StreamKind::kUpload:
      return placement::v1::STREAM_KIND_UPLOAD;
    case StreamKind::kUploadBatch:
      return placement::v1::STREAM_KIND_UPLOAD_BATCH;
    case StreamKind::kDownload:
      return placement::v1::STREAM_KIND_DOWNLOAD;
    case StreamKind::kPrefetch:
      return placement::v1::STREAM_KIND_PREFETCH;
  }
  return placement::v1::STREAM_KIND_UNSPECIFIED;
}

}  // namespace

grpc::ServerUnaryReactor* DaemonHandler::GetStatus(grpc::CallbackServerContext* context,
                                                   const placement::v1::GetStatusRequest*,
                                                   placement::v1::GetStatusResponse* response) {
  // Answers while a cluster forms too (operators watch it form).
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallGate::Ticket ticket;
  absl::StatusOr<Caller> caller = gate_->Admit(*context, &ticket, /*even_if_not_ready=*/true);
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  {
    placement::v1::ClusterStatus* cluster = response->mutable_cluster();
    if (cluster_ == nullptr || !cluster_->enabled()) {
      cluster->set_state(placement::v1::CLUSTER_STATE_SINGLE);
      cluster->set_num_processes(1);
    } else {
      std::shared_ptr<const ClusterView> view = cluster_->view();
      cluster->set_state(ClusterStateToProto(view->state));
      cluster->set_epoch(view->epoch);
      cluster->set_num_processes(view->num_processes);
      cluster->set_coordinator_address(cluster_->config().coordinator);
      cluster->set_peer_address(cluster_->config().peer_address);
      for (const ProcessRecord& p : view->processes) {
        placement::v1::ProcessStatus* out = cluster->add_processes();
        out->set_process_index(p.process_index);
        out->set_state(ProcessStateToProto(p.state));
        out->set_peer_address(p.peer_address);
        out->set_num_devices(static_cast<int64_t>(p.devices.size()));
        out->set_first_device_id(p.first_device_id);
        out->set_joins(p.joins);
      }
    }
  }
  reactor->Finish(ToGrpcStatus([&]() -> absl::Status {
    response->set_version(identity_->version);
    response->set_backend(identity_->backend);
    response->set_backend_note(identity_->backend_note);
    response->set_instance_id(identity_->instance_id);
    response->set_listen_address(identity_->listen_address);
    response->set_process_index(identity_->process_index);
    absl::Duration up = absl::Now() - identity_->start_time;
    int64_t nanos = absl::ToInt64Nanoseconds(up);
    response->mutable_uptime()->set_seconds(nanos / 1000000000);
    response->mutable_uptime()->set_nanos(static_cast<int32_t>(nanos % 1000000000));
    timespec ts = absl::ToTimespec(identity_->start_time);
    response->mutable_start_time()->set_seconds(ts.tv_sec);
    response->mutable_start_time()->set_nanos(static_cast<int32_t>(ts.tv_nsec));
    response->set_num_devices(inventory_->num_devices());
    // Another tenant's tensors, bytes and sessions are not this caller's
    // business: a non-admin of an authenticating daemon sees its own.
    const std::string* tenant = gate_->SeesDaemonWide(*caller) ? nullptr : &caller->tenant;
    const auto figure = [tenant](const DaemonCounts::Figure& f) { return f ? f(tenant) : 0; };
    response->set_num_meshes(figure(counts_.meshes));
    response->set_num_tensors(figure(counts_.tensors));
    response->set_num_prefetch_streams(figure(counts_.prefetch_streams));
    response->set_num_sessions(figure(counts_.sessions));
    response->set_num_session_tensors(figure(counts_.session_tensors));
    response->set_num_open_streams(figure(counts_.open_streams));
    response->set_num_regions(figure(counts_.regions));
    response->set_host_id(identity_->host_id);
    response->set_boot_id(identity_->boot_id);
    response->set_region_socket(identity_->region_socket);
    response->set_device_bytes_in_use(tenant != nullptr && counts_.device_bytes_in_use
                                          ? counts_.device_bytes_in_use(tenant)
                                          : inventory_->TotalMemoryInUse());
    response->set_serving(!gate_->draining());
    return absl::OkStatus();
  }()));
  return reactor;
}

grpc::ServerUnaryReactor* DaemonHandler::ListStreams(grpc::CallbackServerContext* context,
                                                     const placement::v1::ListStreamsRequest*,
                                                     placement::v1::ListStreamsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    if (!counts_.streams) return absl::OkStatus();
    for (const StreamSnapshot& s : counts_.streams()) {
      if (!caller.Sees(s.tenant)) continue;
      placement::v1::StreamStatus* out = response->add_streams();
      out->set_id(s.id);
      out->set_kind(StreamKindToProto(s.kind));
      out->set_tenant(s.tenant);
      out->set_what(s.what);
      out->set_bytes(s.bytes);
      out->set_total_bytes(s.total_bytes);
      timespec ts = absl::ToTimespec(s.opened);
      out->mutable_opened()->set_seconds(ts.tv_sec);
      out->mutable_opened()->set_nanos(static_cast<int32_t>(ts.tv_nsec));
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* DaemonHandler::TrimMemory(grpc::CallbackServerContext* context,
                                                    const placement::v1::TrimMemoryRequest* request,
                                                    placement::v1::TrimMemoryResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    const std::string& tenant = request->tenant();
    if (!gate_->SeesDaemonWide(caller)) {
      if (tenant.empty()) {
        return absl::PermissionDeniedError(
            absl::StrCat("TrimMemory of every tenant is for admins; '", caller.identity,
                         "' has role user in tenant '", caller.tenant, "' (set tenant: \"",
                         caller.tenant, "\" to trim that tenant's cached memory)"));
      }
      if (tenant != caller.tenant) {
        return absl::PermissionDeniedError(
            absl::StrCat("TrimMemory: '", caller.identity, "' of tenant '", caller.tenant,
                         "' may trim only that tenant's memory, not tenant '", tenant, "'"));
      }
    }
    if (!trim_) return absl::UnimplementedError("this daemon has no memory reclaimer");
    ASSIGN_OR_RETURN(const TrimResult result, trim_(tenant));
    response->set_cache_bytes_released(result.cache_bytes_released);
    response->set_resident_bytes_before(result.resident_bytes_before);
    response->set_resident_bytes_after(result.resident_bytes_after);
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
DaemonHandler::DaemonHandler(const DaemonIdentity* identity, const DeviceInventory* inventory,
                             DaemonCounts counts, CallGate* gate, const Cluster* cluster,
                             TrimMemoryFn trim)
    : identity_(identity),
      inventory_(inventory),
      counts_(std::move(counts)),
      gate_(gate),
      cluster_(cluster),
      trim_(std::move(trim)) {}
DaemonHandler::~DaemonHandler() = default;

}  // namespace placement::server
