#include "server/service/tensor_handler.h"

#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/tensor_download_reactor.h"
#include "server/service/tensor_upload_reactor.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

std::vector<std::string> Ids(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  return std::vector<std::string>(ids.begin(), ids.end());
}

}  // namespace

grpc::ServerReadReactor<pb::UploadRequest>* TensorHandler::Upload(
    grpc::CallbackServerContext* context, pb::UploadResponse* response) {
  return new UploadReactor(context, ops_, gate_, response);
}

grpc::ServerReadReactor<pb::UploadBatchRequest>* TensorHandler::UploadBatch(
    grpc::CallbackServerContext* context, pb::UploadBatchResponse* response) {
  return new UploadBatchReactor(context, ops_, gate_, response);
}

grpc::ServerWriteReactor<pb::DownloadResponse>* TensorHandler::Download(
    grpc::CallbackServerContext* /*context*/, const pb::DownloadRequest* request) {
  return new DownloadReactor(ops_, gate_, *request);
}

grpc::ServerUnaryReactor* TensorHandler::Describe(grpc::CallbackServerContext* context,
                                                  const pb::DescribeRequest* request,
                                                  pb::DescribeResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                     ops_->store()->Get(request->tensor_id()));
    TensorToProto(*tensor, response->mutable_tensor());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::List(grpc::CallbackServerContext* context,
                                              const pb::ListTensorsRequest* request,
                                              pb::ListTensorsResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    TensorFilter filter{request->name_prefix(), request->mesh_id()};
    for (const auto& tensor : ops_->store()->List(filter)) {
      TensorToProto(*tensor, response->add_tensors());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Delete(grpc::CallbackServerContext* context,
                                                const pb::DeleteTensorsRequest* request,
                                                pb::DeleteTensorsResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t freed, ops_->store()->Delete(Ids(request->tensor_ids())));
    response->set_freed_bytes(freed);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Place(grpc::CallbackServerContext* context,
                                               const pb::PlaceRequest* request,
                                               pb::PlaceResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
    ASSIGN_OR_RETURN(PlacementRule rule, PlacementRuleFromProto(request->rule()));
    ASSIGN_OR_RETURN(auto tensors,
                     ops_->Place(Ids(request->tensor_ids()), rule, source, request->name()));
    for (const auto& tensor : tensors) TensorToProto(*tensor, response->add_tensors());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Assemble(grpc::CallbackServerContext* context,
                                                  const pb::AssembleRequest* request,
                                                  pb::AssembleResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
    ASSIGN_OR_RETURN(Shape shape, ShapeFromProto(request->shape(), "shape"));
    ASSIGN_OR_RETURN(TensorPlacement placement, PlacementFromProto(request->placement()));
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor,
                     ops_->Assemble(std::move(shape), placement, Ids(request->tensor_ids()), source,
                                    request->name()));
    TensorToProto(*tensor, response->mutable_tensor());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* TensorHandler::Disassemble(grpc::CallbackServerContext* context,
                                                     const pb::DisassembleRequest* request,
                                                     pb::DisassembleResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(request->source()));
    ASSIGN_OR_RETURN(auto tensors, ops_->Disassemble(request->tensor_id(), source));
    for (const auto& tensor : tensors) TensorToProto(*tensor, response->add_tensors());
    return absl::OkStatus();
  });
}

}  // namespace placement::server
