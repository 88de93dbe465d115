#include "server/peer/peer_client.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "placement/v1/peer_service.grpc.pb.h"
#include "server/convert/collective_request_proto.h"
#include "server/convert/mesh_proto.h"
#include "server/peer/cluster_proto.h"
#include "server/peer/peer_call.h"
#include "server/peer/peer_streams.h"
#include "server/peer/tensor_record_proto.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

constexpr absl::Duration kControlCall = absl::Seconds(30);

}  // namespace

absl::StatusOr<std::vector<DeviceState>> PeerClient::GetLocalDevices(int32_t process,
                                                                     absl::Duration timeout) {
  PeerCall call(channels_, cluster_, process, timeout);
  pb::GetLocalDevicesRequest request;
  pb::GetLocalDevicesResponse response;
  RETURN_IF_ERROR(call.Finish(call.stub()->GetLocalDevices(call.context(), request, &response)));
  std::vector<DeviceState> out;
  for (const pb::Device& d : response.devices()) {
    out.push_back(DeviceState{DescriptionFromProto(d), d.memory_in_use_bytes(),
                              d.memory_cached_bytes(), d.memory_charged_bytes()});
  }
  return out;
}

absl::Status PeerClient::InstallMesh(int32_t process, const RegisteredMesh& mesh) {
  PeerCall call(channels_, cluster_, process, kControlCall);
  pb::InstallMeshRequest request;
  MeshToProto(mesh, 0, request.mutable_mesh()->mutable_mesh());
  request.mutable_mesh()->set_tenant(mesh.tenant);
  pb::InstallMeshResponse response;
  return call.Finish(call.stub()->InstallMesh(call.context(), request, &response));
}

absl::StatusOr<int64_t> PeerClient::RemoveMesh(int32_t process, const std::string& mesh_id,
                                               bool force) {
  PeerCall call(channels_, cluster_, process, kControlCall);
  pb::RemoveMeshRequest request;
  request.set_mesh_id(mesh_id);
  request.set_force(force);
  pb::RemoveMeshResponse response;
  RETURN_IF_ERROR(call.Finish(call.stub()->RemoveMesh(call.context(), request, &response)));
  return response.deleted_tensors();
}

namespace {

// One asynchronous unary PeerService call: its PeerCall (context, deadline,
// loss guard), request and response live until the caller destroys it,
// after `then` ran.
template <typename Request, typename Response>
class AsyncUnary final : public PeerTransport::PendingCall {
 public:
  AsyncUnary(PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout,
             Request request)
      : call_(channels, cluster, process, timeout), request_(std::move(request)) {}

  // A PeerService method of the stub's callback interface.
  using Method = void (placement::v1::PeerService::StubInterface::async_interface::*)(
      grpc::ClientContext*, const Request*, Response*, std::function<void(grpc::Status)>);

  // Starts the call with `method` and runs then(status, response) when it
  // ends.
  static std::unique_ptr<PeerTransport::PendingCall> Start(
      std::unique_ptr<AsyncUnary> self, Method method,
      std::function<void(absl::Status, Response&)> then) {
    AsyncUnary* raw = self.get();
    (raw->call_.stub()->async()->*method)(raw->call_.context(), &raw->request_, &raw->response_,
                                          [raw, then = std::move(then)](grpc::Status status) {
                                            then(raw->call_.Finish(status), raw->response_);
                                          });
    return self;
  }

 private:
  PeerCall call_;
  Request request_;
  Response response_;
};

using Async = pb::PeerService::StubInterface::async_interface;

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

std::unique_ptr<PeerTransport::PendingCall> PeerClient::StartCommit(
    int32_t process, const std::vector<const Tensor*>& tensors,
    const std::vector<std::string>& delete_ids, Done done) {
  using Call = AsyncUnary<pb::CommitRequest, pb::CommitResponse>;
  return Call::Start(std::make_unique<Call>(channels_, cluster_, process, kControlCall,
                                            CommitRequestOf(tensors, delete_ids)),
                     &Async::Commit,
                     [done = std::move(done)](absl::Status s, pb::CommitResponse&) { done(s); });
}

// The blocking forms use the synchronous stub: a callback-API completion
// costs more per call on gRPC 1.51 (docs/benchmarks.md).
absl::Status PeerClient::Commit(int32_t process, const std::vector<const Tensor*>& tensors,
                                const std::vector<std::string>& delete_ids) {
  PeerCall call(channels_, cluster_, process, kControlCall);
  pb::CommitResponse response;
  return call.Finish(
      call.stub()->Commit(call.context(), CommitRequestOf(tensors, delete_ids), &response));
}

absl::Status PeerClient::Abort(int32_t process, const std::vector<std::string>& ids) {
  PeerCall call(channels_, cluster_, process, kControlCall);
  pb::AbortResponse response;
  return call.Finish(
      call.stub()->Abort(call.context(), WithTensorIds<pb::AbortRequest>(ids), &response));
}

absl::StatusOr<int64_t> PeerClient::DeleteTensors(int32_t process,
                                                  const std::vector<std::string>& ids) {
  PeerCall call(channels_, cluster_, process, kControlCall);
  pb::PeerDeleteTensorsResponse response;
  RETURN_IF_ERROR(call.Finish(call.stub()->DeleteTensors(
      call.context(), WithTensorIds<pb::PeerDeleteTensorsRequest>(ids), &response)));
  return response.freed_bytes();
}

namespace {

// How long a prepared result may wait for its commit, and how long one
// Prepare may take (a large reshard streams many boxes).
absl::Duration PrepareTimeout(const Cluster& cluster) { return cluster.config().op_timeout * 10; }

// The driver's bounds on a Prepare.
void SetPrepareBounds(const Cluster& cluster, absl::Duration timeout, pb::PrepareRequest* request) {
  DurationToProto(timeout, request->mutable_pending_lifetime());
  DurationToProto(timeout, request->mutable_timeout());
  request->set_driver_process(cluster.process_index());
}

// Sends `request` (its op set) with the driver's bounds; the answer.
absl::Status RunPrepare(PeerChannels* channels, Cluster* cluster, int32_t process,
                        pb::PrepareRequest* request, pb::PrepareResponse* response) {
  const absl::Duration timeout = PrepareTimeout(*cluster);
  SetPrepareBounds(*cluster, timeout, request);
  PeerCall call(channels, cluster, process, timeout);
  return call.Finish(call.stub()->Prepare(call.context(), *request, response));
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

}  // namespace

absl::Status PeerClient::PreparePlace(int32_t process, const std::string& source_id,
                                      const Tensor& result) {
  pb::PrepareRequest request;
  request.mutable_place()->set_source_id(source_id);
  RecordToProto(result, request.mutable_place()->mutable_result());
  pb::PrepareResponse response;
  return RunPrepare(channels_, cluster_, process, &request, &response);
}

absl::Status PeerClient::PrepareAssemble(int32_t process, const std::vector<std::string>& piece_ids,
                                         const Tensor& result, bool donate) {
  pb::PrepareRequest request;
  for (const std::string& id : piece_ids) request.mutable_assemble()->add_piece_ids(id);
  RecordToProto(result, request.mutable_assemble()->mutable_result());
  request.mutable_assemble()->set_source(donate ? pb::SOURCE_HANDLING_DONATE
                                                : pb::SOURCE_HANDLING_KEEP);
  pb::PrepareResponse response;
  return RunPrepare(channels_, cluster_, process, &request, &response);
}

absl::Status PeerClient::PrepareDisassemble(int32_t process, const std::string& source_id,
                                            const std::vector<std::string>& result_ids,
                                            bool donate) {
  pb::PrepareRequest request;
  request.mutable_disassemble()->set_source_id(source_id);
  for (const std::string& id : result_ids) request.mutable_disassemble()->add_result_ids(id);
  request.mutable_disassemble()->set_source(donate ? pb::SOURCE_HANDLING_DONATE
                                                   : pb::SOURCE_HANDLING_KEEP);
  pb::PrepareResponse response;
  return RunPrepare(channels_, cluster_, process, &request, &response);
}

namespace {

// A Prepare of `process`'s part of a collective, with the driver's bounds.
pb::PrepareRequest CollectivePrepareOf(const Cluster& cluster, absl::Duration timeout,
                                       const CollectiveRequest& collective,
                                       const std::string& op_key,
                                       const std::vector<int32_t>& participants,
                                       const std::vector<std::string>& result_ids,
                                       const CrossProcessTicket& ticket) {
  pb::PrepareRequest request;
  SetPrepareBounds(cluster, timeout, &request);
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

std::unique_ptr<PeerTransport::PendingCall> PeerClient::StartPrepareCollective(
    int32_t process, const CollectiveRequest& collective, const std::string& op_key,
    const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
    const CrossProcessTicket& ticket, RecordsDone done) {
  using Call = AsyncUnary<pb::PrepareRequest, pb::PrepareResponse>;
  const absl::Duration timeout = PrepareTimeout(*cluster_);
  Cluster* cluster = cluster_;
  return Call::Start(
      std::make_unique<Call>(channels_, cluster_, process, timeout,
                             CollectivePrepareOf(*cluster_, timeout, collective, op_key,
                                                 participants, result_ids, ticket)),
      &Async::Prepare,
      [cluster, done = std::move(done)](absl::Status s, pb::PrepareResponse& response) {
        if (!s.ok()) {
          done(std::move(s));
        } else {
          done(Shells(response.results(), cluster));
        }
      });
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> PeerClient::PrepareCollective(
    int32_t process, const CollectiveRequest& collective, const std::string& op_key,
    const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
    const CrossProcessTicket& ticket) {
  const absl::Duration timeout = PrepareTimeout(*cluster_);
  pb::PrepareRequest request =
      CollectivePrepareOf(*cluster_, timeout, collective, op_key, participants, result_ids, ticket);
  PeerCall call(channels_, cluster_, process, timeout);
  pb::PrepareResponse response;
  RETURN_IF_ERROR(call.Finish(call.stub()->Prepare(call.context(), request, &response)));
  return Shells(response.results(), cluster_);
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> PeerClient::ListTensorRecords(
    int32_t process) {
  std::vector<std::unique_ptr<Tensor>> out;
  std::string token;
  do {
    PeerCall call(channels_, cluster_, process, kControlCall);
    pb::ListTensorRecordsRequest request;
    request.set_page_token(token);
    pb::ListTensorRecordsResponse response;
    RETURN_IF_ERROR(
        call.Finish(call.stub()->ListTensorRecords(call.context(), request, &response)));
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
