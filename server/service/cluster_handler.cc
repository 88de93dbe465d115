#include "server/service/cluster_handler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/peer/cluster_proto.h"
#include "server/service/peer_unary.h"
#include "server/service/to_proto.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

// A requested wait: unset or non-positive means `fallback`; capped.
absl::Duration WaitOf(const google::protobuf::Duration& d, absl::Duration fallback) {
  const absl::Duration wait = DurationFromProto(d);
  if (wait <= absl::ZeroDuration()) return fallback;
  return std::min(wait, ClusterHandler::kMaxWait);
}

// KeyValueGet's wait: unset means 30 s; a zero (or negative) one looks
// once (a rendezvous whose budget is spent); capped.
absl::Duration GetWaitOf(const pb::KeyValueGetRequest& request) {
  if (!request.has_timeout()) return absl::Seconds(30);
  return std::clamp(DurationFromProto(request.timeout()), absl::ZeroDuration(),
                    ClusterHandler::kMaxWait);
}

}  // namespace

grpc::ServerUnaryReactor* ClusterHandler::Join(grpc::CallbackServerContext* context,
                                               const pb::JoinRequest* request,
                                               pb::JoinResponse* response) {
  return RunPeerAsync(context, *gate_, [this, request, response](auto finish) {
    coordinator_->membership().Join(JoinInfoFromProto(*request),
                                    WaitOf(request->timeout(), absl::Minutes(5)),
                                    [response, finish](absl::StatusOr<ClusterView> view) {
                                      if (view.ok())
                                        ViewToProto(*view, response->mutable_topology());
                                      finish(view.status());
                                    });
  });
}

grpc::ServerUnaryReactor* ClusterHandler::Heartbeat(grpc::CallbackServerContext* context,
                                                    const pb::HeartbeatRequest* request,
                                                    pb::HeartbeatResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(ClusterView view, coordinator_->membership().Heartbeat(
                                           request->process_index(), request->instance_id()));
    // The caller knows this epoch: only the version, not the membership.
    if (view.epoch == request->epoch()) view.processes.clear();
    ViewToProto(view, response->mutable_topology());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::Leave(grpc::CallbackServerContext* context,
                                                const pb::LeaveRequest* request,
                                                pb::LeaveResponse* /*response*/) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    coordinator_->membership().Leave(request->process_index(), request->instance_id());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::GetTopology(grpc::CallbackServerContext* context,
                                                      const pb::GetTopologyRequest* /*request*/,
                                                      pb::Topology* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    ViewToProto(coordinator_->membership().View(), response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::KeyValueSet(grpc::CallbackServerContext* context,
                                                      const pb::KeyValueSetRequest* request,
                                                      pb::KeyValueSetResponse* /*response*/) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    return coordinator_->kv().Set(request->key(), request->value());
  });
}

grpc::ServerUnaryReactor* ClusterHandler::KeyValueGet(grpc::CallbackServerContext* context,
                                                      const pb::KeyValueGetRequest* request,
                                                      pb::KeyValueGetResponse* response) {
  return RunPeerAsync(context, *gate_, [this, request, response](auto finish) {
    coordinator_->kv().Get(request->key(), GetWaitOf(*request),
                           [response, finish](absl::StatusOr<std::string> value) {
                             if (value.ok()) response->set_value(*std::move(value));
                             finish(value.status());
                           });
  });
}

grpc::ServerUnaryReactor* ClusterHandler::KeyValueDelete(grpc::CallbackServerContext* context,
                                                         const pb::KeyValueDeleteRequest* request,
                                                         pb::KeyValueDeleteResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    response->set_deleted(coordinator_->kv().DeletePrefix(request->prefix()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::Barrier(grpc::CallbackServerContext* context,
                                                  const pb::BarrierRequest* request,
                                                  pb::BarrierResponse* response) {
  return RunPeerAsync(context, *gate_, [this, request, response](auto finish) {
    BarrierArrival arrival;
    arrival.barrier_id = request->barrier_id();
    arrival.process_index = request->process_index();
    arrival.participants.assign(request->participants().begin(), request->participants().end());
    if (arrival.participants.empty()) {
      const int32_t n = coordinator_->membership().View().num_processes;
      for (int32_t p = 0; p < n; ++p) arrival.participants.push_back(p);
    }
    arrival.payload = request->payload();
    arrival.timeout = WaitOf(request->timeout(), absl::Seconds(60));
    arrival.sequence_key = request->sequence_key();
    coordinator_->barriers().Arrive(arrival,
                                    [response, finish](absl::StatusOr<BarrierResult> result) {
                                      if (result.ok()) {
                                        for (std::string& payload : result->payloads) {
                                          response->add_payloads(std::move(payload));
                                        }
                                        for (int32_t p : result->participants)
                                          response->add_participants(p);
                                        response->set_token(result->token);
                                        response->set_ticket(result->ticket);
                                        response->set_generation(result->generation);
                                        response->set_epoch(result->epoch);
                                      }
                                      finish(result.status());
                                    });
  });
}

grpc::ServerUnaryReactor* ClusterHandler::ReportContextFailure(
    grpc::CallbackServerContext* context, const pb::ReportContextFailureRequest* request,
    pb::ReportContextFailureResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    response->set_generation(
        coordinator_->barriers().ReportFailure(request->sequence_key(), request->generation()));
    return absl::OkStatus();
  });
}

absl::Status ClusterHandler::CheckMeshes() const {
  if (meshes_ == nullptr) return absl::UnavailableError("the coordinator is still starting");
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ClusterHandler::CreateMesh(grpc::CallbackServerContext* context,
                                                     const pb::ClusterCreateMeshRequest* request,
                                                     pb::ClusterCreateMeshResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    RETURN_IF_ERROR(CheckMeshes());
    std::vector<MeshAxis> axes;
    for (const pb::MeshAxis& axis : request->axes()) axes.push_back({axis.name(), axis.size()});
    std::vector<int64_t> ids(request->device_ids().begin(), request->device_ids().end());
    ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->CreateMesh(request->tenant(), request->mesh_id(),
                                                              std::move(axes), std::move(ids)));
    MeshToProto(mesh, 0, response->mutable_mesh()->mutable_mesh());
    response->mutable_mesh()->set_tenant(mesh.tenant);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::DeleteMesh(grpc::CallbackServerContext* context,
                                                     const pb::ClusterDeleteMeshRequest* request,
                                                     pb::ClusterDeleteMeshResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    RETURN_IF_ERROR(CheckMeshes());
    ASSIGN_OR_RETURN(int64_t deleted, meshes_->DeleteMesh(request->mesh_id(), request->tenant(),
                                                          request->admin(), request->force()));
    response->set_deleted_tensors(deleted);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ClusterHandler::ListMeshes(grpc::CallbackServerContext* context,
                                                     const pb::ClusterListMeshesRequest* /*req*/,
                                                     pb::ClusterListMeshesResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    RETURN_IF_ERROR(CheckMeshes());
    for (const RegisteredMesh& mesh : meshes_->ListMeshes()) {
      pb::ClusterMesh* out = response->add_meshes();
      MeshToProto(mesh, 0, out->mutable_mesh());
      out->set_tenant(mesh.tenant);
    }
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
ClusterHandler::ClusterHandler(Coordinator* coordinator, CallGate* gate)
    : coordinator_(coordinator), gate_(gate) {}
ClusterHandler::~ClusterHandler() = default;

}  // namespace placement::server
