// Server-side reactor for placement.v1.TensorService.Download on gRPC's
// callback API: a header, then chunks of chunk_size_bytes (0 = 1 MiB, at most
// 4 MiB) read from the device straight into the one outgoing message, so only
// one chunk is buffered at a time whatever the tensor size. Every chunk
// message stays under gRPC's default 4 MiB receive limit (a 4 MiB request is
// served as chunks of 4 MiB - 1 KiB), so clients need no raised limit.
//
// Holds a CallGate ticket and the tensor (through its DownloadPlan) for the
// whole stream: a concurrent Delete frees the memory when the stream ends.
// Owns itself (deleted in OnDone); gRPC serializes its reactions.
#ifndef PLACEMENT_SERVER_SERVICE_TENSOR_DOWNLOAD_REACTOR_H_
#define PLACEMENT_SERVER_SERVICE_TENSOR_DOWNLOAD_REACTOR_H_

#include <cstdint>
#include <memory>

#include "grpcpp/grpcpp.h"
#include "placement/v1/tensor_service.pb.h"
#include "server/service/call_gate.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

class DownloadReactor final : public grpc::ServerWriteReactor<placement::v1::DownloadResponse> {
 public:
  DownloadReactor(grpc::CallbackServerContext* context, const TensorOps* ops, CallGate* gate,
                  const placement::v1::DownloadRequest& request);

  void OnWriteDone(bool ok) override;
  void OnDone() override { delete this; }

 private:
  absl::Status Open(const TensorOps* ops, const Caller& caller,
                    const placement::v1::DownloadRequest& request);
  void Fail(const absl::Status& status);

  CallGate::Ticket ticket_;
  StreamRegistry::Lease lease_;  // counts the stream; reaps it when the client stops reading
  std::unique_ptr<DownloadPlan> plan_;
  int64_t chunk_bytes_ = 0;
  int64_t offset_ = 0;
  placement::v1::DownloadResponse response_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_TENSOR_DOWNLOAD_REACTOR_H_
