#include "server/peer/coordinator_client.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "placement/v1/cluster_service.grpc.pb.h"
#include "server/convert/mesh_proto.h"
#include "server/peer/cluster_proto.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

// Calls that do not wait get this long.
constexpr absl::Duration kQuickCall = absl::Seconds(10);
// Slack on top of a waiting call's own timeout.
constexpr absl::Duration kSlack = absl::Seconds(5);

absl::StatusOr<RegisteredMesh> RegisteredMeshFromProto(const pb::ClusterMesh& proto) {
  ASSIGN_OR_RETURN(Mesh mesh, MeshFromProto(proto.mesh()));
  return RegisteredMesh{proto.mesh().id(), std::move(mesh), proto.tenant()};
}

}  // namespace

struct CoordinatorClient::Stub {
  std::unique_ptr<pb::ClusterService::Stub> stub;
};

CoordinatorClient::CoordinatorClient(PeerChannels* channels, std::string address)
    : channels_(channels), address_(std::move(address)), stub_(std::make_unique<Stub>()) {
  stub_->stub = pb::ClusterService::NewStub(channels_->Get(address_));
}

CoordinatorClient::~CoordinatorClient() = default;

// Runs one unary call with `timeout`; transport failures name the
// coordinator.
#define PLACEMENT_COORD_CALL(method, request, response, timeout)                                  \
  [&]() -> absl::Status {                                                                         \
    grpc::ClientContext context;                                                                  \
    channels_->Prepare(&context, timeout);                                                        \
    grpc::Status s = stub_->stub->method(&context, request, &response);                           \
    if (s.ok()) return absl::OkStatus();                                                          \
    const bool answered = context.GetServerTrailingMetadata().count("placement-peer-answer") > 0; \
    if (!answered && (s.error_code() == grpc::StatusCode::UNAVAILABLE ||                          \
                      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)) {                   \
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),                          \
                          absl::StrCat("coordinator at ", address_, ": ", s.error_message()));    \
    }                                                                                             \
    return FromGrpcStatus(s);                                                                     \
  }()

absl::StatusOr<ClusterView> CoordinatorClient::Join(const JoinInfo& info, absl::Duration timeout) {
  pb::JoinRequest request;
  JoinInfoToProto(info, &request);
  DurationToProto(timeout, request.mutable_timeout());
  pb::JoinResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(Join, request, response, timeout + kSlack));
  return ViewFromProto(response.topology());
}

absl::StatusOr<ClusterView> CoordinatorClient::Heartbeat(int32_t process_index,
                                                         const std::string& instance_id,
                                                         int64_t epoch, absl::Duration timeout) {
  pb::HeartbeatRequest request;
  request.set_process_index(process_index);
  request.set_instance_id(instance_id);
  request.set_epoch(epoch);
  pb::HeartbeatResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(Heartbeat, request, response, timeout));
  return ViewFromProto(response.topology());
}

absl::Status CoordinatorClient::Leave(int32_t process_index, const std::string& instance_id) {
  pb::LeaveRequest request;
  request.set_process_index(process_index);
  request.set_instance_id(instance_id);
  pb::LeaveResponse response;
  return PLACEMENT_COORD_CALL(Leave, request, response, absl::Seconds(2));
}

absl::StatusOr<ClusterView> CoordinatorClient::Topology(absl::Duration timeout) {
  pb::GetTopologyRequest request;
  pb::Topology response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(GetTopology, request, response, timeout));
  return ViewFromProto(response);
}

absl::Status CoordinatorClient::Set(const std::string& key, const std::string& value) {
  pb::KeyValueSetRequest request;
  request.set_key(key);
  request.set_value(value);
  pb::KeyValueSetResponse response;
  return PLACEMENT_COORD_CALL(KeyValueSet, request, response, kQuickCall);
}

absl::StatusOr<std::string> CoordinatorClient::Get(const std::string& key, absl::Duration timeout) {
  // No wait (or a spent one) looks once: the coordinator reads a zero wait
  // so (an unset one as its default of seconds).
  timeout = std::max(timeout, absl::ZeroDuration());
  pb::KeyValueGetRequest request;
  request.set_key(key);
  DurationToProto(timeout, request.mutable_timeout());
  pb::KeyValueGetResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(KeyValueGet, request, response, timeout + kSlack));
  return std::move(*response.mutable_value());
}

absl::StatusOr<int64_t> CoordinatorClient::DeletePrefix(const std::string& prefix) {
  pb::KeyValueDeleteRequest request;
  request.set_prefix(prefix);
  pb::KeyValueDeleteResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(KeyValueDelete, request, response, kQuickCall));
  return response.deleted();
}

absl::StatusOr<BarrierResult> CoordinatorClient::Barrier(const BarrierArrival& arrival) {
  pb::BarrierRequest request;
  request.set_barrier_id(arrival.barrier_id);
  request.set_process_index(arrival.process_index);
  for (int32_t p : arrival.participants) request.add_participants(p);
  request.set_payload(arrival.payload);
  DurationToProto(arrival.timeout, request.mutable_timeout());
  request.set_sequence_key(arrival.sequence_key);
  pb::BarrierResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(Barrier, request, response, arrival.timeout + kSlack));
  BarrierResult result;
  result.participants.assign(response.participants().begin(), response.participants().end());
  result.payloads.assign(response.payloads().begin(), response.payloads().end());
  result.token = response.token();
  result.ticket = response.ticket();
  result.generation = response.generation();
  result.epoch = response.epoch();
  return result;
}

absl::StatusOr<int64_t> CoordinatorClient::ReportContextFailure(const std::string& sequence_key,
                                                                int64_t generation,
                                                                const std::string& reason) {
  pb::ReportContextFailureRequest request;
  request.set_sequence_key(sequence_key);
  request.set_generation(generation);
  request.set_reason(reason.substr(0, 1024));
  pb::ReportContextFailureResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(ReportContextFailure, request, response, kQuickCall));
  return response.generation();
}

absl::StatusOr<RegisteredMesh> CoordinatorClient::CreateMesh(
    const std::string& tenant, const std::string& mesh_id, const std::vector<MeshAxis>& axes,
    const std::vector<int64_t>& device_ids) {
  pb::ClusterCreateMeshRequest request;
  request.set_tenant(tenant);
  request.set_mesh_id(mesh_id);
  for (const MeshAxis& axis : axes) {
    pb::MeshAxis* a = request.add_axes();
    a->set_name(axis.name);
    a->set_size(axis.size);
  }
  for (int64_t id : device_ids) request.add_device_ids(id);
  pb::ClusterCreateMeshResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(CreateMesh, request, response, absl::Seconds(30)));
  return RegisteredMeshFromProto(response.mesh());
}

absl::StatusOr<int64_t> CoordinatorClient::DeleteMesh(const std::string& mesh_id,
                                                      const std::string& tenant, bool admin,
                                                      bool force) {
  pb::ClusterDeleteMeshRequest request;
  request.set_mesh_id(mesh_id);
  request.set_tenant(tenant);
  request.set_admin(admin);
  request.set_force(force);
  pb::ClusterDeleteMeshResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(DeleteMesh, request, response, absl::Seconds(30)));
  return response.deleted_tensors();
}

absl::StatusOr<std::vector<RegisteredMesh>> CoordinatorClient::ListMeshes() {
  pb::ClusterListMeshesRequest request;
  pb::ClusterListMeshesResponse response;
  RETURN_IF_ERROR(PLACEMENT_COORD_CALL(ListMeshes, request, response, kQuickCall));
  std::vector<RegisteredMesh> out;
  for (const pb::ClusterMesh& m : response.meshes()) {
    ASSIGN_OR_RETURN(RegisteredMesh mesh, RegisteredMeshFromProto(m));
    out.push_back(std::move(mesh));
  }
  return out;
}

#undef PLACEMENT_COORD_CALL

}  // namespace placement::server
