#include "server/peer/peer_client.h"

#include <functional>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "placement/v1/peer_service.grpc.pb.h"
#include "server/convert/collective_request_proto.h"
#include "server/convert/mesh_proto.h"
#include "server/peer/cluster_proto.h"
#include "server/peer/peer_call.h"
#include "server/peer/peer_streams.h"
#include "server/peer/peer_unary_call.h"
#include "server/peer/tensor_record_proto.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

constexpr absl::Duration kControlCall = absl::Seconds(30);

using Stub = pb::PeerService::Stub;
using PendingCall = PeerTransport::PendingCall;

// Starts `method` with `request`, for a caller that needs only its status.
template <typename Request, typename Response>
std::unique_ptr<PendingCall> StartForStatus(PeerChannels* channels, Cluster* cluster,
                                            int32_t process, absl::Duration timeout,
                                            PeerMethod<Request, Response> method,
                                            std::type_identity_t<Request> request,
                                            PeerTransport::Done done) {
  return StartPeerCall(channels, cluster, process, timeout, method, std::move(request),
                       [done = std::move(done)](absl::Status s, Response&) { done(std::move(s)); });
}

std::vector<DeviceState> DevicesOf(const pb::GetLocalDevicesResponse& response) {
  std::vector<DeviceState> out;
  for (const pb::Device& d : response.devices()) {
    out.push_back(DeviceState{DescriptionFromProto(d), d.memory_in_use_bytes(),
                              d.memory_cached_bytes(), d.memory_charged_bytes()});
  }
  return out;
}

pb::InstallMeshRequest InstallMeshRequestOf(const RegisteredMesh& mesh) {
  pb::InstallMeshRequest request;
  MeshToProto(mesh, 0, request.mutable_mesh()->mutable_mesh());
  request.mutable_mesh()->set_tenant(mesh.tenant);
  return request;
}

pb::RemoveMeshRequest RemoveMeshRequestOf(const std::string& mesh_id, bool force) {
  pb::RemoveMeshRequest request;
  request.set_mesh_id(mesh_id);
  request.set_force(force);
  return request;
}

pb::CommitRequest CommitRequestOf(const std::vector<const Tensor*>& tensors,
                                  const std::vector<std::string>& delete_ids) {
  pb::CommitRequest request;
  for (const Tensor* t : tensors) RecordToProto(*t, request.add_tensors());
  for (const std::string& id : delete_ids) request.add_delete_ids(id);
  return request;
}

template <typename Request>
Request WithTensorIds(const std::vector<std::string>& ids) {
  Request request;
  for (const std::string& id : ids) request.add_tensor_ids(id);
  return request;
}

}  // namespace

// Every blocking form is its Start* form waited for, or the same call
// (PeerUnaryCall) where it returns more than the Start* form's `done` gets.

std::unique_ptr<PendingCall> PeerClient::StartGetLocalDevices(int32_t process,
                                                              absl::Duration timeout,
                                                              DevicesDone done) {
  return StartPeerCall(channels_, cluster_, process, timeout, &Stub::PrepareAsyncGetLocalDevices,
                       pb::GetLocalDevicesRequest(),
                       [done = std::move(done)](absl::Status s, pb::GetLocalDevicesResponse& r) {
                         if (!s.ok()) {
                           done(std::move(s));
                         } else {
                           done(DevicesOf(r));
                         }
                       });
}

absl::StatusOr<std::vector<DeviceState>> PeerClient::GetLocalDevices(int32_t process,
                                                                     absl::Duration timeout) {
  return AwaitPeerCall<absl::StatusOr<std::vector<DeviceState>>>(
      [&](DevicesDone done) { return StartGetLocalDevices(process, timeout, std::move(done)); });
}

std::unique_ptr<PendingCall> PeerClient::StartInstallMesh(int32_t process,
                                                          const RegisteredMesh& mesh, Done done) {
  return StartForStatus(channels_, cluster_, process, kControlCall, &Stub::PrepareAsyncInstallMesh,
                        InstallMeshRequestOf(mesh), std::move(done));
}

absl::Status PeerClient::InstallMesh(int32_t process, const RegisteredMesh& mesh) {
  return AwaitPeerCall<absl::Status>(
      [&](Done done) { return StartInstallMesh(process, mesh, std::move(done)); });
}

std::unique_ptr<PendingCall> PeerClient::StartRemoveMesh(int32_t process,
                                                         const std::string& mesh_id, bool force,
                                                         Done done) {
  return StartForStatus(channels_, cluster_, process, kControlCall, &Stub::PrepareAsyncRemoveMesh,
                        RemoveMeshRequestOf(mesh_id, force), std::move(done));
}

absl::StatusOr<int64_t> PeerClient::RemoveMesh(int32_t process, const std::string& mesh_id,
                                               bool force) {
  ASSIGN_OR_RETURN(pb::RemoveMeshResponse response,
                   CallPeer(channels_, cluster_, process, kControlCall,
                            &Stub::PrepareAsyncRemoveMesh, RemoveMeshRequestOf(mesh_id, force)));
  return response.deleted_tensors();
}

std::unique_ptr<PendingCall> PeerClient::StartCommit(int32_t process,
                                                     const std::vector<const Tensor*>& tensors,
                                                     const std::vector<std::string>& delete_ids,
                                                     Done done) {
  return StartForStatus(channels_, cluster_, process, kControlCall, &Stub::PrepareAsyncCommit,
                        CommitRequestOf(tensors, delete_ids), std::move(done));
}

absl::Status PeerClient::Commit(int32_t process, const std::vector<const Tensor*>& tensors,
                                const std::vector<std::string>& delete_ids) {
  return AwaitPeerCall<absl::Status>(
      [&](Done done) { return StartCommit(process, tensors, delete_ids, std::move(done)); });
}

std::unique_ptr<PendingCall> PeerClient::StartAbort(int32_t process,
                                                    const std::vector<std::string>& ids,
                                                    Done done) {
  return StartForStatus(channels_, cluster_, process, kControlCall, &Stub::PrepareAsyncAbort,
                        WithTensorIds<pb::AbortRequest>(ids), std::move(done));
}

absl::Status PeerClient::Abort(int32_t process, const std::vector<std::string>& ids) {
  return AwaitPeerCall<absl::Status>(
      [&](Done done) { return StartAbort(process, ids, std::move(done)); });
}

std::unique_ptr<PendingCall> PeerClient::StartDeleteTensors(int32_t process,
                                                            const std::vector<std::string>& ids,
                                                            Done done) {
  return StartForStatus(channels_, cluster_, process, kControlCall,
                        &Stub::PrepareAsyncDeleteTensors,
                        WithTensorIds<pb::PeerDeleteTensorsRequest>(ids), std::move(done));
}

absl::StatusOr<int64_t> PeerClient::DeleteTensors(int32_t process,
                                                  const std::vector<std::string>& ids) {
  ASSIGN_OR_RETURN(
      pb::PeerDeleteTensorsResponse response,
      CallPeer(channels_, cluster_, process, kControlCall, &Stub::PrepareAsyncDeleteTensors,
               WithTensorIds<pb::PeerDeleteTensorsRequest>(ids)));
  return response.freed_bytes();
}

namespace {

// Starts a Prepare of `request` (its op set) with the driver's bounds: how
// long a prepared result may wait for its commit, and how long the Prepare
// may take (a large reshard streams many boxes).
std::unique_ptr<PendingCall> StartPrepare(
    PeerChannels* channels, Cluster* cluster, int32_t process, pb::PrepareRequest request,
    std::function<void(absl::Status, pb::PrepareResponse&)> then) {
  const absl::Duration timeout = cluster->config().op_timeout * 10;
  DurationToProto(timeout, request.mutable_pending_lifetime());
  DurationToProto(timeout, request.mutable_timeout());
  request.set_driver_process(cluster->process_index());
  return StartPeerCall(channels, cluster, process, timeout, &Stub::PrepareAsyncPrepare,
                       std::move(request), std::move(then));
}

// StartPrepare for a caller that needs only its status.
std::unique_ptr<PendingCall> StartPrepareForStatus(PeerChannels* channels, Cluster* cluster,
                                                   int32_t process, pb::PrepareRequest request,
                                                   PeerTransport::Done done) {
  return StartPrepare(
      channels, cluster, process, std::move(request),
      [done = std::move(done)](absl::Status s, pb::PrepareResponse&) { done(std::move(s)); });
}

// The results' records of a Prepare, as shells.
absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> Shells(
    const google::protobuf::RepeatedPtrField<pb::TensorRecord>& records, Cluster* cluster) {
  std::vector<std::unique_ptr<Tensor>> out;
  for (const pb::TensorRecord& record : records) {
    ASSIGN_OR_RETURN(std::unique_ptr<Tensor> shell, ShellFromRecord(record, [cluster](int64_t id) {
                       return cluster->ProcessOf(id);
                     }));
    out.push_back(std::move(shell));
  }
  return out;
}

pb::SourceHandling SourceOf(bool donate) {
  return donate ? pb::SOURCE_HANDLING_DONATE : pb::SOURCE_HANDLING_KEEP;
}

pb::PrepareRequest PlaceRequestOf(const std::string& source_id, const Tensor& result) {
  pb::PrepareRequest request;
  request.mutable_place()->set_source_id(source_id);
  RecordToProto(result, request.mutable_place()->mutable_result());
  return request;
}

pb::PrepareRequest AssembleRequestOf(const std::vector<std::string>& piece_ids,
                                     const Tensor& result, bool donate) {
  pb::PrepareRequest request;
  for (const std::string& id : piece_ids) request.mutable_assemble()->add_piece_ids(id);
  RecordToProto(result, request.mutable_assemble()->mutable_result());
  request.mutable_assemble()->set_source(SourceOf(donate));
  return request;
}

pb::PrepareRequest DisassembleRequestOf(const std::string& source_id,
                                        const std::vector<std::string>& result_ids, bool donate) {
  pb::PrepareRequest request;
  request.mutable_disassemble()->set_source_id(source_id);
  for (const std::string& id : result_ids) request.mutable_disassemble()->add_result_ids(id);
  request.mutable_disassemble()->set_source(SourceOf(donate));
  return request;
}

// The Prepare of a participant's part of a collective (bounds set on
// sending).
pb::PrepareRequest CollectivePrepareOf(const CollectiveRequest& collective,
                                       const std::string& op_key,
                                       const std::vector<int32_t>& participants,
                                       const std::vector<std::string>& result_ids,
                                       const CrossProcessTicket& ticket) {
  pb::PrepareRequest request;
  pb::CollectiveOp* op = request.mutable_collective();
  CollectiveRequestToProto(collective, op);
  op->set_op_key(op_key);
  pb::CollectiveTicket* t = op->mutable_ticket();
  t->set_set_key(ticket.set_key);
  t->set_epoch(static_cast<int64_t>(ticket.epoch));
  t->set_generation(static_cast<int64_t>(ticket.generation));
  t->set_ticket(static_cast<int64_t>(ticket.ticket));
  for (int32_t p : participants) op->add_participants(p);
  for (const std::string& id : result_ids) op->add_result_ids(id);
  return request;
}

}  // namespace

std::unique_ptr<PendingCall> PeerClient::StartPreparePlace(int32_t process,
                                                           const std::string& source_id,
                                                           const Tensor& result, Done done) {
  return StartPrepareForStatus(channels_, cluster_, process, PlaceRequestOf(source_id, result),
                               std::move(done));
}

std::unique_ptr<PendingCall> PeerClient::StartPrepareAssemble(
    int32_t process, const std::vector<std::string>& piece_ids, const Tensor& result, bool donate,
    Done done) {
  return StartPrepareForStatus(channels_, cluster_, process,
                               AssembleRequestOf(piece_ids, result, donate), std::move(done));
}

std::unique_ptr<PendingCall> PeerClient::StartPrepareDisassemble(
    int32_t process, const std::string& source_id, const std::vector<std::string>& result_ids,
    bool donate, Done done) {
  return StartPrepareForStatus(channels_, cluster_, process,
                               DisassembleRequestOf(source_id, result_ids, donate),
                               std::move(done));
}

std::unique_ptr<PendingCall> PeerClient::StartPrepareCollective(
    int32_t process, const CollectiveRequest& collective, const std::string& op_key,
    const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
    const CrossProcessTicket& ticket, RecordsDone done) {
  Cluster* cluster = cluster_;
  return StartPrepare(
      channels_, cluster_, process,
      CollectivePrepareOf(collective, op_key, participants, result_ids, ticket),
      [cluster, done = std::move(done)](absl::Status s, pb::PrepareResponse& response) {
        if (!s.ok()) {
          done(std::move(s));
        } else {
          done(Shells(response.results(), cluster));
        }
      });
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> PeerClient::ListTensorRecords(
    int32_t process) {
  std::vector<std::unique_ptr<Tensor>> out;
  std::string token;
  do {
    pb::ListTensorRecordsRequest request;
    request.set_page_token(token);
    ASSIGN_OR_RETURN(pb::ListTensorRecordsResponse response,
                     CallPeer(channels_, cluster_, process, kControlCall,
                              &Stub::PrepareAsyncListTensorRecords, std::move(request)));
    ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> page,
                     Shells(response.tensors(), cluster_));
    for (auto& shell : page) out.push_back(std::move(shell));
    token = response.next_page_token();
  } while (!token.empty());
  return out;
}

absl::StatusOr<std::unique_ptr<RemoteBoxStream>> PeerClient::OpenBox(int32_t process,
                                                                     const std::string& tensor_id,
                                                                     int64_t device_id,
                                                                     const Box& box,
                                                                     absl::Duration timeout) {
  return OpenPeerBox(channels_, cluster_, process, tensor_id, device_id, box, timeout);
}

absl::StatusOr<std::unique_ptr<PeerShardWriter>> PeerClient::OpenShardWriter(
    int32_t process, const Tensor& record, absl::Duration pending_lifetime,
    absl::Duration timeout) {
  return OpenPeerShardWriter(channels_, cluster_, process, record, pending_lifetime, timeout);
}

}  // namespace placement::server
