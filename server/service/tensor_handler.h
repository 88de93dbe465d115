// gRPC front for placement.v1.TensorService: translates protos to TensorOps /
// TensorStore calls and back. Streams run on reactors (tensor_upload_reactor.h,
// tensor_download_reactor.h); unary calls through RunUnary. No logic of its
// own. Thread-safe (the components are).
#ifndef PLACEMENT_SERVER_SERVICE_TENSOR_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_TENSOR_HANDLER_H_

#include "placement/v1/tensor_service.grpc.pb.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

// Upload and UploadBatch are registered raw (their reactors parse each
// message themselves, tensor_upload_reactor.h); the service and its
// reflection are unchanged for clients.
using TensorServiceBase = placement::v1::TensorService::WithRawCallbackMethod_Upload<
    placement::v1::TensorService::WithRawCallbackMethod_UploadBatch<
        placement::v1::TensorService::CallbackService>>;

class TensorHandler final : public TensorServiceBase {
 public:
  // REQUIRES: ops, gate and regions (null: region transfers are refused)
  // outlive the handler.
  TensorHandler(const TensorOps* ops, CallGate* gate, RegionRegistry* regions = nullptr);
  ~TensorHandler() override;

  grpc::ServerReadReactor<grpc::ByteBuffer>* Upload(grpc::CallbackServerContext* context,
                                                    grpc::ByteBuffer* response) override;
  grpc::ServerReadReactor<grpc::ByteBuffer>* UploadBatch(grpc::CallbackServerContext* context,
                                                         grpc::ByteBuffer* response) override;
  grpc::ServerWriteReactor<placement::v1::DownloadResponse>* Download(
      grpc::CallbackServerContext* context, const placement::v1::DownloadRequest* request) override;
  grpc::ServerUnaryReactor* Describe(grpc::CallbackServerContext* context,
                                     const placement::v1::DescribeRequest* request,
                                     placement::v1::DescribeResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const placement::v1::ListTensorsRequest* request,
                                 placement::v1::ListTensorsResponse* response) override;
  grpc::ServerUnaryReactor* Delete(grpc::CallbackServerContext* context,
                                   const placement::v1::DeleteTensorsRequest* request,
                                   placement::v1::DeleteTensorsResponse* response) override;
  grpc::ServerUnaryReactor* Place(grpc::CallbackServerContext* context,
                                  const placement::v1::PlaceRequest* request,
                                  placement::v1::PlaceResponse* response) override;
  grpc::ServerUnaryReactor* Assemble(grpc::CallbackServerContext* context,
                                     const placement::v1::AssembleRequest* request,
                                     placement::v1::AssembleResponse* response) override;
  grpc::ServerUnaryReactor* Disassemble(grpc::CallbackServerContext* context,
                                        const placement::v1::DisassembleRequest* request,
                                        placement::v1::DisassembleResponse* response) override;

 private:
  const TensorOps* ops_;
  CallGate* gate_;
  RegionRegistry* regions_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_TENSOR_HANDLER_H_
