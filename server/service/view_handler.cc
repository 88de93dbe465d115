#include "server/service/view_handler.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"
#include "server/tensor/tenant_access.h"
#include "server/view/device_import.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

void ExportToProto(const ExportSnapshot& e, pb::ExportInfo* out) {
  out->set_export_id(e.id);
  out->set_tensor_id(e.tensor_id);
  out->set_tenant(e.tenant);
  out->set_session_id(e.session_id);
  out->set_num_shards(e.num_shards);
  out->set_size_bytes(e.bytes);
  out->set_reader_pid(e.reader_pid);
  const timespec created = absl::ToTimespec(e.created);
  out->mutable_created()->set_seconds(created.tv_sec);
  out->mutable_created()->set_nanos(static_cast<int32_t>(created.tv_nsec));
}

void ShardViewToProto(const ShardViewInfo& view, pb::ShardView* out) {
  out->set_shard_index(view.shard_index);
  out->set_device_id(view.device_id);
  out->set_size_bytes(view.size);
  out->set_fd_index(view.fd_index);
  out->set_offset(view.offset);
  out->set_copied(view.copied);
  out->set_cuda_ipc_handle(view.ipc_handle);
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
    ASSIGN_OR_RETURN(ExportSnapshot exported, exports_->Export(caller, std::move(tensor), shards));
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

}  // namespace placement::server
