#include "server/service/peer_handler.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/peer/cluster_proto.h"
#include "server/peer/tensor_record_proto.h"
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
    std::vector<MeshAxis> axes;
    for (const pb::MeshAxis& a : proto.axes()) axes.push_back({a.name(), a.size()});
    ASSIGN_OR_RETURN(Mesh mesh,
                     Mesh::Create(std::move(axes), std::vector<int64_t>(proto.device_ids().begin(),
                                                                        proto.device_ids().end())));
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
    tensors_->AbortHere(
        std::vector<std::string>(request->tensor_ids().begin(), request->tensor_ids().end()));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PeerHandler::DeleteTensors(grpc::CallbackServerContext* context,
                                                     const pb::PeerDeleteTensorsRequest* request,
                                                     pb::PeerDeleteTensorsResponse* response) {
  return RunPeerUnary(context, *gate_, [&]() -> absl::Status {
    response->set_freed_bytes(tensors_->DeleteHere(
        std::vector<std::string>(request->tensor_ids().begin(), request->tensor_ids().end())));
    return absl::OkStatus();
  });
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

// Filled in by the data plane (cluster_ops); until a ClusterOps is wired,
// the streaming and prepare calls are refused.
grpc::ServerReadReactor<pb::WriteShardsRequest>* PeerHandler::WriteShards(
    grpc::CallbackServerContext* context, pb::WriteShardsResponse* /*response*/) {
  class Refuse : public grpc::ServerReadReactor<pb::WriteShardsRequest> {
   public:
    Refuse() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not wired")); }
    void OnDone() override { delete this; }
  };
  (void)context;
  return new Refuse();
}

grpc::ServerWriteReactor<pb::ReadBoxResponse>* PeerHandler::ReadBox(
    grpc::CallbackServerContext* context, const pb::ReadBoxRequest* /*request*/) {
  class Refuse : public grpc::ServerWriteReactor<pb::ReadBoxResponse> {
   public:
    Refuse() { Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not wired")); }
    void OnDone() override { delete this; }
  };
  (void)context;
  return new Refuse();
}

grpc::ServerUnaryReactor* PeerHandler::Prepare(grpc::CallbackServerContext* context,
                                               const pb::PrepareRequest* /*request*/,
                                               pb::PrepareResponse* /*response*/) {
  return RunPeerUnary(context, *gate_,
                      []() -> absl::Status { return absl::UnimplementedError("not wired"); });
}

}  // namespace placement::server
