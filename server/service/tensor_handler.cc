#include "server/service/tensor_handler.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/rule_meshes.h"
#include "server/service/tensor_download_reactor.h"
#include "server/service/tensor_upload_reactor.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"
#include "server/tensor/label_limits.h"
#include "server/tensor/list_page.h"
#include "server/tensor/tenant_access.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return std::vector<std::string>(ids.begin(), ids.end());
}

}  // namespace

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorHandler::Upload(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new UploadReactor(context, ops_, gate_, response, regions_);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* TensorHandler::UploadBatch(
    grpc::CallbackServerContext* context, grpc::ByteBuffer* response) {
  return new UploadBatchReactor(context, ops_, gate_, response, regions_);
}

grpc::ServerWriteReactor<pb::DownloadResponse>* TensorHandler::Download(
    grpc::CallbackServerContext* context, const pb::DownloadRequest* request) {
  return new DownloadReactor(context, ops_, gate_, *request, regions_);
}

grpc::ServerUnaryReactor* TensorHandler::Describe(grpc::CallbackServerContext* context,
                                                  const pb::DescribeRequest* request,
                                                  pb::DescribeResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                     GetVisibleTensor(*ops_->store(), caller, request->tensor_id(), "tensor_id"));
    TensorToProto(*tensor, response->mutable_tensor());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::List(grpc::CallbackServerContext* context,
                                              const pb::ListTensorsRequest* request,
                                              pb::ListTensorsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    TensorFilter filter{request->name_prefix(), request->mesh_id()};
    ASSIGN_OR_RETURN(TensorPage page, PageOf(ListVisibleTensors(*ops_->store(), caller, filter),
                                             request->page_size(), request->page_token()));
    for (const auto& tensor : page.tensors) TensorToProto(*tensor, response->add_tensors());
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Delete(grpc::CallbackServerContext* context,
                                                const pb::DeleteTensorsRequest* request,
                                                pb::DeleteTensorsResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(
        std::vector<std::string> ids,
        ResolveTensorIds(*ops_->store(), caller, Ids(request->tensor_ids()), "tensor_ids"));
    ASSIGN_OR_RETURN(int64_t freed, ops_->store()->Delete(ids));
    response->set_freed_bytes(freed);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Place(grpc::CallbackServerContext* context,
                                               const pb::PlaceRequest* request,
                                               pb::PlaceResponse* response) {
  return RunCreating(
      context, *gate_, ops_->store(),
      [&](const Caller& caller, std::vector<std::string>* created) -> absl::Status {
        ASSIGN_OR_RETURN(
            std::vector<std::string> ids,
            ResolveTensorIds(*ops_->store(), caller, Ids(request->tensor_ids()), "tensor_ids"));
        RETURN_IF_ERROR(CheckLength("name", request->name(), kMaxTensorNameLength));
        RETURN_IF_ERROR(CheckRuleMeshesVisible(*ops_->meshes(), caller, request->rule()));
        ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
        ASSIGN_OR_RETURN(PlacementRule rule, PlacementRuleFromProto(request->rule()));
        ASSIGN_OR_RETURN(auto tensors, ops_->Place(ids, rule, source, request->name()));
        for (const auto& tensor : tensors) {
          created->push_back(tensor->id);
          TensorToProto(*tensor, response->add_tensors());
        }
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TensorHandler::Assemble(grpc::CallbackServerContext* context,
                                                  const pb::AssembleRequest* request,
                                                  pb::AssembleResponse* response) {
  return RunCreating(
      context, *gate_, ops_->store(),
      [&](const Caller& caller, std::vector<std::string>* created) -> absl::Status {
        ASSIGN_OR_RETURN(
            std::vector<std::string> ids,
            ResolveTensorIds(*ops_->store(), caller, Ids(request->tensor_ids()), "tensor_ids"));
        RETURN_IF_ERROR(CheckLength("name", request->name(), kMaxTensorNameLength));
        RETURN_IF_ERROR(CheckPlacementMeshVisible(*ops_->meshes(), caller, request->placement()));
        ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
        ASSIGN_OR_RETURN(Shape shape, ShapeFromProto(request->shape(), "shape"));
        ASSIGN_OR_RETURN(TensorPlacement placement, PlacementFromProto(request->placement()));
        ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                         ops_->Assemble(std::move(shape), placement, ids, source, request->name()));
        created->push_back(tensor->id);
        TensorToProto(*tensor, response->mutable_tensor());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* TensorHandler::Disassemble(grpc::CallbackServerContext* context,
                                                     const pb::DisassembleRequest* request,
                                                     pb::DisassembleResponse* response) {
  return RunCreating(
      context, *gate_, ops_->store(),
      [&](const Caller& caller, std::vector<std::string>* created) -> absl::Status {
        ASSIGN_OR_RETURN(std::string id, ResolveTensorId(*ops_->store(), caller,
                                                         request->tensor_id(), "tensor_id"));
        ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
        ASSIGN_OR_RETURN(auto tensors, ops_->Disassemble(id, source));
        for (const auto& tensor : tensors) {
          created->push_back(tensor->id);
          TensorToProto(*tensor, response->add_tensors());
        }
        return absl::OkStatus();
      });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
TensorHandler::TensorHandler(const TensorOps* ops, CallGate* gate, RegionRegistry* regions)
    : ops_(ops), gate_(gate), regions_(regions) {}
TensorHandler::~TensorHandler() = default;

}  // namespace placement::server
