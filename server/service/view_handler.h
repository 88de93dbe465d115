// gRPC front for placement.v1.ViewService (docs/api/views.md): translates
// protos to ExportRegistry / UploadReservations / ImportDeviceTensor calls
// and back. No logic of its own. Thread-safe (the components are).
#ifndef PLACEMENT_SERVER_SERVICE_VIEW_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_VIEW_HANDLER_H_

#include "placement/v1/view_service.grpc.pb.h"
#include "server/service/call_gate.h"
#include "server/tensor/tensor_ops.h"
#include "server/view/export_registry.h"
#include "server/view/upload_reservations.h"

namespace placement::server {

class ViewHandler final : public placement::v1::ViewService::CallbackService {
 public:
  // REQUIRES: the arguments outlive the handler.
  ViewHandler(const TensorOps* ops, ExportRegistry* exports, UploadReservations* uploads,
              CallGate* gate);
  ~ViewHandler() override;

  grpc::ServerUnaryReactor* ExportShards(grpc::CallbackServerContext* context,
                                         const placement::v1::ExportShardsRequest* request,
                                         placement::v1::ExportShardsResponse* response) override;
  grpc::ServerUnaryReactor* Unexport(grpc::CallbackServerContext* context,
                                     const placement::v1::UnexportRequest* request,
                                     placement::v1::UnexportResponse* response) override;
  grpc::ServerUnaryReactor* ListExports(grpc::CallbackServerContext* context,
                                        const placement::v1::ListExportsRequest* request,
                                        placement::v1::ListExportsResponse* response) override;
  grpc::ServerUnaryReactor* ImportTensor(grpc::CallbackServerContext* context,
                                         const placement::v1::ImportTensorRequest* request,
                                         placement::v1::ImportTensorResponse* response) override;
  grpc::ServerUnaryReactor* ReserveUpload(grpc::CallbackServerContext* context,
                                          const placement::v1::ReserveUploadRequest* request,
                                          placement::v1::ReserveUploadResponse* response) override;
  grpc::ServerUnaryReactor* CommitUpload(grpc::CallbackServerContext* context,
                                         const placement::v1::CommitUploadRequest* request,
                                         placement::v1::CommitUploadResponse* response) override;
  grpc::ServerUnaryReactor* CancelUpload(grpc::CallbackServerContext* context,
                                         const placement::v1::CancelUploadRequest* request,
                                         placement::v1::CancelUploadResponse* response) override;

 private:
  const TensorOps* ops_;
  TensorStore* store_;
  ExportRegistry* exports_;
  UploadReservations* uploads_;
  CallGate* gate_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_VIEW_HANDLER_H_
