#include "server/service/peer_handler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/cluster/cluster_collectives.h"
#include "server/cluster/cluster_data.h"
#include "server/cluster/cluster_ops.h"
#include "server/peer/cluster_proto.h"
#include "server/peer/tensor_record_proto.h"
#include "server/service/from_proto.h"
#include "server/service/peer_unary.h"
#include "server/service/to_proto.h"
#include "server/tensor/list_page.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

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

grpc::ServerUnaryReactor* PeerHandler::GetLocalDevices(grpc::CallbackServerContext* context,
                                                       const pb::GetLocalDevicesRequest* /*req*/,
                                                       pb::GetLocalDevicesResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    for (const DeviceState& d : inventory_->ListLocal()) DeviceToProto(d, response->add_devices());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PeerHandler::InstallMesh(grpc::CallbackServerContext* context,
                                                   const pb::InstallMeshRequest* request,
                                                   pb::InstallMeshResponse* /*response*/) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    const pb::Mesh& proto = request->mesh().mesh();
    ASSIGN_OR_RETURN(Mesh mesh, MeshFromProto(proto));
    meshes_->InstallHere(RegisteredMesh{proto.id(), std::move(mesh), request->mesh().tenant()});
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PeerHandler::RemoveMesh(grpc::CallbackServerContext* context,
                                                  const pb::RemoveMeshRequest* request,
                                                  pb::RemoveMeshResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t deleted, meshes_->RemoveHere(request->mesh_id(), request->force()));
    response->set_deleted_tensors(deleted);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PeerHandler::Commit(grpc::CallbackServerContext* context,
                                              const pb::CommitRequest* request,
                                              pb::CommitResponse* /*response*/) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> shells,
                     Shells(request->tensors(), cluster_));
    return tensors_->CommitHere(
        std::move(shells),
        std::vector<std::string>(request->delete_ids().begin(), request->delete_ids().end()));
  });
}

grpc::ServerUnaryReactor* PeerHandler::Abort(grpc::CallbackServerContext* context,
                                             const pb::AbortRequest* request,
                                             pb::AbortResponse* /*response*/) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    tensors_->AbortForDriver(
        std::vector<std::string>(request->tensor_ids().begin(), request->tensor_ids().end()));
    return absl::OkStatus();
  });
}

void PeerHandler::AwaitSettled(const std::vector<std::string>& ids) const {
  if (collectives_ == nullptr) return;
  const absl::Time deadline = absl::Now() + cluster_->config().op_timeout;
  for (const std::string& id : ids) collectives_->AwaitSettled(id, deadline);
}

bool PeerHandler::Settled(const std::vector<std::string>& ids) const {
  if (collectives_ == nullptr) return true;
  const absl::Time now = absl::Now();
  return std::all_of(ids.begin(), ids.end(),
                     [&](const std::string& id) { return collectives_->AwaitSettled(id, now); });
}

grpc::ServerUnaryReactor* PeerHandler::DeleteTensors(grpc::CallbackServerContext* context,
                                                     const pb::PeerDeleteTensorsRequest* request,
                                                     pb::PeerDeleteTensorsResponse* response) {
  std::vector<std::string> ids(request->tensor_ids().begin(), request->tensor_ids().end());
  const bool settled = Settled(ids);
  auto run = [this, ids = std::move(ids), settled, response]() -> absl::Status {
    // Deleted after a multi-controller call that is still committing here,
    // not before it (which would leave its commit behind).
    if (!settled) AwaitSettled(ids);
    response->set_freed_bytes(tensors_->DeleteHere(ids));
    return absl::OkStatus();
  };
  // A wait for a call still committing here (it may wait for its turn
  // behind others) goes off the callback threads, which the calls it waits
  // for may need.
  if (settled) return RunPeerUnary(context, *gate_, run);
  return RunPeerBlocking(context, *gate_, *prepare_pool_, run);
}

grpc::ServerUnaryReactor* PeerHandler::ListTensorRecords(
    grpc::CallbackServerContext* context, const pb::ListTensorRecordsRequest* request,
    pb::ListTensorRecordsResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    std::vector<std::shared_ptr<const Tensor>> all = tensors_->store()->List();
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
    std::vector<std::string> ids;
    for (const auto& t : all) ids.push_back(t->id);
    ASSIGN_OR_RETURN(KeyPage page, PageOfKeys(ids, request->page_size(), request->page_token()));
    for (size_t i = page.begin; i < page.end; ++i) RecordToProto(*all[i], response->add_tensors());
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

}  // namespace placement::server

namespace placement::server {

namespace {

// Serves ReadBox: one chunk in flight at a time (gRPC flow control bounds
// the memory to a chunk).
class ReadBoxReactor final : public grpc::ServerWriteReactor<pb::ReadBoxResponse> {
 public:
  // Admits the call (finished at once when refused: admitted() is false).
  ReadBoxReactor(CallGate* gate, grpc::CallbackServerContext* context) {
    context->AddTrailingMetadata(kPeerAnswerKey, "1");
    absl::StatusOr<Caller> caller = AdmitPeer(*gate, *context, &ticket_);
    admitted_ = caller.ok();
    if (!admitted_) Finish(ToGrpcStatus(caller.status()));
  }
  bool admitted() const { return admitted_; }

  // Opens the box and streams it; from any thread, once, when admitted.
  void Start(TensorStore* store, const pb::ReadBoxRequest& request) {
    Box box;
    for (const pb::IndexRange& r : request.box()) box.push_back({r.begin(), r.end()});
    chunk_bytes_ = request.chunk_size_bytes() > 0
                       ? std::min<int64_t>(request.chunk_size_bytes(), int64_t{4} << 20)
                       : int64_t{1} << 20;
    absl::StatusOr<std::unique_ptr<BoxSource>> source =
        BoxSource::Open(store, request.tensor_id(), request.device_id(), box);
    if (!source.ok()) {
      Finish(ToGrpcStatus(source.status()));
      return;
    }
    source_ = *std::move(source);
    Next();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the reader went away"));
      return;
    }
    Next();
  }
  void OnDone() override { delete this; }

 private:
  void Next() {
    if (source_->done()) {
      Finish(grpc::Status::OK);
      return;
    }
    absl::Status status = source_->Next(chunk_bytes_, response_.mutable_chunk());
    if (!status.ok()) {
      Finish(ToGrpcStatus(status));
      return;
    }
    StartWrite(&response_);
  }

  CallGate::Ticket ticket_;
  bool admitted_ = false;
  int64_t chunk_bytes_ = 0;
  std::unique_ptr<BoxSource> source_;
  pb::ReadBoxResponse response_;
};

// Receives WriteShards: the header allocates this daemon's shards, writes
// fill them, the end of the stream checks them and holds them pending.
class WriteShardsReactor final : public grpc::ServerReadReactor<pb::WriteShardsRequest> {
 public:
  WriteShardsReactor(CallGate* gate, grpc::CallbackServerContext* context, Cluster* cluster,
                     ClusterTensors* tensors, pb::WriteShardsResponse* response)
      : cluster_(cluster), tensors_(tensors), response_(response) {
    context->AddTrailingMetadata(kPeerAnswerKey, "1");
    absl::StatusOr<Caller> caller = AdmitPeer(*gate, *context, &ticket_);
    if (!caller.ok()) {
      Finish(ToGrpcStatus(caller.status()));
      return;
    }
    StartRead(&request_);
  }
  void OnReadDone(bool ok) override {
    absl::Status status = ok ? Handle() : End();
    if (!status.ok()) {
      sink_.reset();
      Finish(ToGrpcStatus(status));
      return;
    }
    if (ok) StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  absl::Status Handle() {
    if (request_.has_header()) {
      if (sink_ != nullptr) return absl::InvalidArgumentError("a second header");
      ASSIGN_OR_RETURN(std::unique_ptr<Tensor> record,
                       ShellFromRecord(request_.header().tensor(),
                                       [this](int64_t id) { return cluster_->ProcessOf(id); }));
      ASSIGN_OR_RETURN(sink_, ShardSink::Open(tensors_->store(), *record));
      driver_ = request_.header().driver_process();
      lifetime_ = request_.header().pending_lifetime();
      return absl::OkStatus();
    }
    if (sink_ == nullptr) return absl::InvalidArgumentError("a write before the header");
    const pb::ShardWrite& write = request_.write();
    std::vector<int64_t> devices(write.device_ids().begin(), write.device_ids().end());
    runs_.clear();
    int64_t at = 0;
    for (const pb::ByteSpan& span : write.runs()) {
      runs_.push_back(ByteRun{at, span.offset(), span.length()});
      at += span.length();
    }
    if (at != static_cast<int64_t>(write.data().size())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "write runs add up to ", at, " bytes but the data is ", write.data().size()));
    }
    return sink_->Write(devices, runs_, write.data());
  }

  absl::Status End() {
    if (sink_ == nullptr) return absl::InvalidArgumentError("the stream carried no header");
    const int64_t written = sink_->bytes_written();
    ASSIGN_OR_RETURN(std::unique_ptr<Tensor> tensor, sink_->Finish());
    sink_.reset();
    RETURN_IF_ERROR(tensors_->AddPending(std::move(tensor), driver_, DurationFromProto(lifetime_)));
    response_->set_bytes_written(written);
    Finish(grpc::Status::OK);
    return absl::OkStatus();
  }

  Cluster* cluster_;
  ClusterTensors* tensors_;
  pb::WriteShardsResponse* response_;
  CallGate::Ticket ticket_;
  pb::WriteShardsRequest request_;
  std::unique_ptr<ShardSink> sink_;
  std::vector<ByteRun> runs_;
  int32_t driver_ = -1;
  google::protobuf::Duration lifetime_;
};

}  // namespace

grpc::ServerReadReactor<pb::WriteShardsRequest>* PeerHandler::WriteShards(
    grpc::CallbackServerContext* context, pb::WriteShardsResponse* response) {
  return new WriteShardsReactor(gate_, context, cluster_, tensors_, response);
}

grpc::ServerWriteReactor<pb::ReadBoxResponse>* PeerHandler::ReadBox(
    grpc::CallbackServerContext* context, const pb::ReadBoxRequest* request) {
  auto* reactor = new ReadBoxReactor(gate_, context);
  if (!reactor->admitted()) return reactor;
  if (Settled({request->tensor_id()})) {
    reactor->Start(tensors_->store(), *request);
    return reactor;
  }
  // A result of a multi-controller call still finishing here (the
  // reader's own call already returned): waited for off the callback
  // threads. The reactor lives until it finishes.
  prepare_pool_->Submit([this, reactor, request] {
    AwaitSettled({request->tensor_id()});
    reactor->Start(tensors_->store(), *request);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PeerHandler::Prepare(grpc::CallbackServerContext* context,
                                               const pb::PrepareRequest* request,
                                               pb::PrepareResponse* response) {
  // Preparing may stream boxes from other daemons: off the callback thread.
  return RunPeerBlocking(
      context, *gate_, *prepare_pool_, [this, request, response]() -> absl::Status {
        auto process_of = [this](int64_t id) { return cluster_->ProcessOf(id); };
        const int32_t driver = request->driver_process();
        const absl::Duration lifetime = DurationFromProto(request->pending_lifetime());
        switch (request->op_case()) {
          case pb::PrepareRequest::kPlace: {
            AwaitSettled({request->place().source_id()});
            ASSIGN_OR_RETURN(std::unique_ptr<Tensor> result,
                             ShellFromRecord(request->place().result(), process_of));
            return ops_->PreparePlace(request->place().source_id(), *result, driver, lifetime);
          }
          case pb::PrepareRequest::kAssemble: {
            ASSIGN_OR_RETURN(std::unique_ptr<Tensor> result,
                             ShellFromRecord(request->assemble().result(), process_of));
            ASSIGN_OR_RETURN(SourceHandling source,
                             SourceHandlingFromProto(request->assemble().source()));
            const std::vector<std::string> pieces(request->assemble().piece_ids().begin(),
                                                  request->assemble().piece_ids().end());
            AwaitSettled(pieces);
            return ops_->PrepareAssemble(pieces, *result, source, driver, lifetime);
          }
          case pb::PrepareRequest::kDisassemble: {
            ASSIGN_OR_RETURN(SourceHandling source,
                             SourceHandlingFromProto(request->disassemble().source()));
            AwaitSettled({request->disassemble().source_id()});
            return ops_->PrepareDisassemble(
                request->disassemble().source_id(),
                std::vector<std::string>(request->disassemble().result_ids().begin(),
                                         request->disassemble().result_ids().end()),
                source, driver, lifetime);
          }
          case pb::PrepareRequest::kCollective: {
            const pb::CollectiveOp& op = request->collective();
            ASSIGN_OR_RETURN(CollectiveRequest collective, CollectiveRequestFromProto(op));
            AwaitSettled(collective.tensor_ids);
            std::vector<int32_t> participants(op.participants().begin(), op.participants().end());
            std::vector<std::string> ids(op.result_ids().begin(), op.result_ids().end());
            CollectiveContext context;
            context.deadline = absl::Now() + DurationFromProto(request->timeout());
            if (!op.has_ticket()) {
              return absl::InvalidArgumentError(absl::StrCat(
                  "collective.ticket: required (collective ", op.op_key(),
                  "); the driving daemon takes the set's ticket for every participant"));
            }
            CrossProcessTicket ticket;
            ticket.set_key = op.ticket().set_key();
            ticket.epoch = static_cast<uint64_t>(op.ticket().epoch());
            ticket.generation = static_cast<uint64_t>(op.ticket().generation());
            ticket.ticket = static_cast<uint64_t>(op.ticket().ticket());
            ASSIGN_OR_RETURN(
                std::vector<std::unique_ptr<Tensor>> records,
                collectives_->Participate(participants, ids, driver, collective, context, ticket));
            for (const auto& record : records) RecordToProto(*record, response->add_results());
            return absl::OkStatus();
          }
          default:
            return absl::UnimplementedError("this Prepare operation is not known to this daemon");
        }
      });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
PeerHandler::PeerHandler(Cluster* cluster, DeviceInventory* inventory, ClusterTensors* tensors,
                         ClusterMeshes* meshes, ClusterOps* ops, CallGate* gate)
    : cluster_(cluster),
      inventory_(inventory),
      tensors_(tensors),
      meshes_(meshes),
      ops_(ops),
      gate_(gate) {}
PeerHandler::~PeerHandler() = default;

}  // namespace placement::server
