#include "server/service/view_handler.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/device/device_backend.h"
#include "server/service/from_proto.h"
#include "server/service/rule_meshes.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"
#include "server/tensor/tenant_access.h"
#include "server/view/device_import.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

void SetTimestamp(absl::Time t, google::protobuf::Timestamp* out) {
  const timespec ts = absl::ToTimespec(t);
  out->set_seconds(ts.tv_sec);
  out->set_nanos(static_cast<int32_t>(ts.tv_nsec));
}

void ExportToProto(const ExportSnapshot& e, pb::ExportInfo* out) {
  out->set_export_id(e.id);
  out->set_tensor_id(e.tensor_id);
  out->set_tenant(e.tenant);
  out->set_session_id(e.session_id);
  out->set_num_shards(e.num_shards);
  out->set_size_bytes(e.bytes);
  out->set_reader_pid(e.reader_pid);
  SetTimestamp(e.created, out->mutable_created());
}

void ShardViewToProto(const ShardViewInfo& view, pb::ShardView* out) {
  out->set_shard_index(view.shard_index);
  out->set_device_id(view.device_id);
  out->set_size_bytes(view.size);
  out->set_fd_index(view.fd_index);
  out->set_offset(view.offset);
  out->set_copied(view.copied);
  out->set_cuda_ipc_handle(view.ipc_handle);
  out->set_writable(view.writable);
  out->set_mapping_bytes(view.file_size);
}

}  // namespace

grpc::ServerUnaryReactor* ViewHandler::ExportShards(grpc::CallbackServerContext* context,
                                                    const pb::ExportShardsRequest* request,
                                                    pb::ExportShardsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                     GetVisibleTensor(*store_, caller, request->tensor_id(), "tensor_id"));
    TensorToProto(*tensor, response->mutable_tensor());
    const std::vector<int32_t> shards(request->shard_indices().begin(),
                                      request->shard_indices().end());
    // A copy-out hands over only the caller's tenant's own memory unsealed.
    std::optional<MemoryOwnerTag> copy_out;
    if (request->for_copy()) copy_out = store_->MemoryOwnerOf(caller.tenant);
    ASSIGN_OR_RETURN(ExportSnapshot exported,
                     exports_->Export(caller, std::move(tensor), shards, copy_out));
    ExportToProto(exported, response->mutable_export_());
    for (const ShardViewInfo& view : exported.shards) {
      ShardViewToProto(view, response->add_shards());
    }
    response->set_fd_token(exported.fd_token);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ViewHandler::Unexport(grpc::CallbackServerContext* context,
                                                const pb::UnexportRequest* request,
                                                pb::UnexportResponse* /*response*/) {
  return RunUnary(context, *gate_, [&](const Caller& caller) {
    return exports_->Unexport(caller, request->export_id());
  });
}

grpc::ServerUnaryReactor* ViewHandler::ListExports(grpc::CallbackServerContext* context,
                                                   const pb::ListExportsRequest* /*request*/,
                                                   pb::ListExportsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    for (const ExportSnapshot& e : exports_->List(caller))
      ExportToProto(e, response->add_exports());
    const ExportRegistry::Totals totals = exports_->TotalsFor(caller);
    response->set_exports_total(totals.exports);
    response->set_bytes_total(totals.bytes);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ViewHandler::ImportTensor(grpc::CallbackServerContext* context,
                                                    const pb::ImportTensorRequest* request,
                                                    pb::ImportTensorResponse* response) {
  return RunCreating(
      context, *gate_, store_,
      [&](const Caller& caller, std::vector<std::string>* created) -> absl::Status {
        ASSIGN_OR_RETURN(TensorSpec spec, TensorSpecFromProto(request->dtype(), request->shape(),
                                                              request->name(), "", "request"));
        spec.owner.tenant = caller.tenant;
        ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                         ImportDeviceTensor(*store_, spec, request->device_id(),
                                            request->cuda_ipc_handle(), request->offset()));
        created->push_back(tensor->id);
        TensorToProto(*tensor, response->mutable_tensor());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* ViewHandler::ReserveUpload(grpc::CallbackServerContext* context,
                                                     const pb::ReserveUploadRequest* request,
                                                     pb::ReserveUploadResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    const pb::UploadHeader& header = request->header();
    if (header.has_process_local()) {
      return absl::InvalidArgumentError(
          "header.process_local: a multi-controller upload cannot be written in place; upload "
          "this process's part through Upload");
    }
    ASSIGN_OR_RETURN(TensorSpec spec, TensorSpecFromProto(header.dtype(), header.shape(),
                                                          header.name(), header.owner(), "header"));
    spec.owner.tenant = caller.tenant;
    RETURN_IF_ERROR(CheckRuleMeshesVisible(*ops_->meshes(), caller, header.rule()));
    ASSIGN_OR_RETURN(PlacementRule rule, PlacementRuleFromProto(header.rule()));
    RETURN_IF_ERROR(uploads_->CheckRoom(caller));  // before anything is allocated
    std::unique_ptr<UploadSession> upload;
    {
      // The trainer's client writes every byte (and brings in the pages).
      OutsideWriterScope written_outside;
      ASSIGN_OR_RETURN(upload, ops_->StartUpload(std::move(spec), rule));
    }
    TensorToProto(upload->tensor(), response->mutable_tensor());
    ASSIGN_OR_RETURN(
        ReservationSnapshot reserved,
        uploads_->Reserve(caller, std::move(upload), store_->MemoryOwnerOf(caller.tenant)));
    response->set_reservation_id(reserved.id);
    for (const UploadSlotInfo& slot : reserved.slots) {
      pb::UploadSlot* out = response->add_slots();
      out->set_shard_index(slot.shard_index);
      out->set_device_id(slot.device_id);
      out->set_size_bytes(slot.size);
      out->set_fd_index(slot.fd_index);
      out->set_offset(slot.offset);
      out->set_mapping_bytes(slot.file_size);
    }
    response->set_fd_token(reserved.fd_token);
    SetTimestamp(reserved.expires, response->mutable_expires());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* ViewHandler::CommitUpload(grpc::CallbackServerContext* context,
                                                    const pb::CommitUploadRequest* request,
                                                    pb::CommitUploadResponse* response) {
  return RunCreating(context, *gate_, store_,
                     [&](const Caller& caller, std::vector<std::string>* created) -> absl::Status {
                       ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                                        uploads_->Commit(caller, request->reservation_id()));
                       created->push_back(tensor->id);
                       TensorToProto(*tensor, response->mutable_tensor());
                       return absl::OkStatus();
                     });
}

grpc::ServerUnaryReactor* ViewHandler::CancelUpload(grpc::CallbackServerContext* context,
                                                    const pb::CancelUploadRequest* request,
                                                    pb::CancelUploadResponse* /*response*/) {
  return RunUnary(context, *gate_, [&](const Caller& caller) {
    return uploads_->Cancel(caller, request->reservation_id());
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
ViewHandler::ViewHandler(const TensorOps* ops, ExportRegistry* exports, UploadReservations* uploads,
                         CallGate* gate)
    : ops_(ops), store_(ops->store()), exports_(exports), uploads_(uploads), gate_(gate) {}
ViewHandler::~ViewHandler() = default;

}  // namespace placement::server
