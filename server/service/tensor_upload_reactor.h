// Server-side reactors for the client-streaming uploads of
// placement.v1.TensorService (Upload, UploadBatch), on gRPC's callback API:
// no thread is pinned per stream.
//
// Each reactor holds a CallGate ticket for the whole stream, expects a header
// first and then chunks, and scatters every chunk into the shards as it
// arrives (through UploadSession / BatchUploadSession). On any error,
// client cancellation or a stream that ends early, the session is freed
// BEFORE the status is sent, so device memory is back to its baseline when
// the client sees the error. If the client cancels after the commit (so it
// never learned the ids), the committed tensors are deleted in OnDone.
//
// The methods are registered raw (TensorHandler): the reactor reads each
// message as bytes and parses it itself, because gRPC reports a message that
// does not parse exactly like the end of the stream -- an unparseable message
// after the last chunk would otherwise commit the upload as if the client had
// half-closed. Here it fails the upload INVALID_ARGUMENT naming the message.
//
// Reactors own themselves (deleted in OnDone). gRPC serializes their
// reactions.
#ifndef PLACEMENT_SERVER_SERVICE_TENSOR_UPLOAD_REACTOR_H_
#define PLACEMENT_SERVER_SERVICE_TENSOR_UPLOAD_REACTOR_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "placement/v1/tensor_service.pb.h"
#include "server/region/region_registry.h"
#include "server/service/call_gate.h"
#include "server/service/creating_reactor.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

// The read loop shared by both uploads. Derived classes construct their
// state, then call Begin() last in their constructor.
template <typename Request, typename Response>
class UploadStreamReactor : public grpc::ServerReadReactor<grpc::ByteBuffer> {
 public:
  void OnReadDone(bool ok) final {
    if (ok) lease_.Progress();
    if (!ok) {
      if (context_->IsCancelled()) {
        Abort();
        this->Finish(grpc::Status(grpc::StatusCode::CANCELLED,
                                  "upload cancelled (by the client, or by the daemon after "
                                  "--stream_idle_timeout without progress)"));
        return;
      }
      absl::Status status = Complete();
      if (!status.ok()) {
        Abort();
      } else {
        status = SerializeResponse();
        // As every call that creates tensors (creating_reactor.h): a tensor
        // whose id may never reach the caller is not kept.
        if (status.ok()) status = DeliveryStatus(*context_);
        if (!status.ok()) ForgetCommitted();
      }
      this->Finish(ToGrpcStatus(status));
      return;
    }
    ++messages_;
    absl::Status status =
        grpc::SerializationTraits<Request>::Deserialize(&buffer_, &request_).ok()
            ? Consume(request_)
            : absl::InvalidArgumentError(
                  absl::StrCat("message ", messages_, " of the stream does not parse as ",
                               Request::descriptor()->full_name(), "; the upload is abandoned"));
    request_.Clear();
    if (!status.ok()) {
      Abort();
      this->Finish(ToGrpcStatus(status));
      return;
    }
    this->StartRead(&buffer_);
  }

  void OnDone() final {
    if (context_->IsCancelled()) ForgetCommitted();
    delete this;
  }

 protected:
  UploadStreamReactor(grpc::CallbackServerContext* context, CallGate* gate, StreamKind kind,
                      grpc::ByteBuffer* out)
      : context_(context), gate_(gate), kind_(kind), out_(out) {}

  void Begin() {
    absl::StatusOr<Caller> caller = gate_->Admit(*context_, &ticket_);
    if (!caller.ok()) {
      this->Finish(ToGrpcStatus(caller.status()));
      return;
    }
    caller_ = *std::move(caller);
    absl::StatusOr<StreamRegistry::Lease> lease = gate_->OpenStream(caller_, context_, kind_);
    if (!lease.ok()) {
      this->Finish(ToGrpcStatus(lease.status()));
      return;
    }
    lease_ = *std::move(lease);
    this->StartRead(&buffer_);
  }

  // One message of the stream (header or chunk).
  virtual absl::Status Consume(const Request& request) = 0;
  // The client half-closed: check, commit and fill the response.
  virtual absl::Status Complete() = 0;
  // Frees everything not yet committed.
  virtual void Abort() = 0;
  // The call failed after Complete: delete what was committed.
  virtual void ForgetCommitted() = 0;

  // Who is uploading (set by Begin before the first Consume).
  const Caller& caller() const { return caller_; }
  // For ListStreams: what the stream uploads, how many bytes in all, and
  // how many went in so far.
  void Describe(std::string what, int64_t total_bytes) {
    lease_.Describe(std::move(what), total_bytes);
  }
  void Moved(int64_t bytes) { lease_.Progress(bytes); }
  // What Complete fills; serialized to the client after it.
  Response* response() { return &response_; }
  // Hands committed tensors to the caller's session (CallGate::AdoptCreated).
  absl::Status AdoptCreated(const std::vector<std::string>& ids) {
    return gate_->AdoptCreated(caller_, ids);
  }

 private:
  absl::Status SerializeResponse() {
    bool own_buffer = false;
    grpc::Status status =
        grpc::SerializationTraits<Response>::Serialize(response_, out_, &own_buffer);
    return status.ok() ? absl::OkStatus()
                       : absl::InternalError(absl::StrCat("cannot serialize the response: ",
                                                          status.error_message()));
  }

  grpc::CallbackServerContext* context_;
  CallGate* gate_;
  const StreamKind kind_;
  grpc::ByteBuffer* const out_;  // gRPC's response buffer
  CallGate::Ticket ticket_;
  StreamRegistry::Lease lease_;  // counts the stream; reaps it when stalled
  Caller caller_;
  grpc::ByteBuffer buffer_;  // the message being read
  int64_t messages_ = 0;
  Request request_;
  Response response_;
};

class UploadReactor final
    : public UploadStreamReactor<placement::v1::UploadRequest, placement::v1::UploadResponse> {
 public:
  UploadReactor(grpc::CallbackServerContext* context, const TensorOps* ops, CallGate* gate,
                grpc::ByteBuffer* response, RegionRegistry* regions = nullptr);

 private:
  absl::Status Consume(const placement::v1::UploadRequest& request) override;
  absl::Status Complete() override;
  void Abort() override { session_.reset(); }
  void ForgetCommitted() override;

  const TensorOps* ops_;
  RegionRegistry* regions_;  // null: region payloads are refused
  bool header_seen_ = false;
  std::unique_ptr<UploadSession> session_;
  std::string committed_id_;
};

class UploadBatchReactor final : public UploadStreamReactor<placement::v1::UploadBatchRequest,
                                                            placement::v1::UploadBatchResponse> {
 public:
  UploadBatchReactor(grpc::CallbackServerContext* context, const TensorOps* ops, CallGate* gate,
                     grpc::ByteBuffer* response, RegionRegistry* regions = nullptr);

 private:
  absl::Status Consume(const placement::v1::UploadBatchRequest& request) override;
  absl::Status Complete() override;
  void Abort() override { session_.reset(); }
  void ForgetCommitted() override;

  const TensorOps* ops_;
  RegionRegistry* regions_;  // null: region payloads are refused
  bool header_seen_ = false;
  std::unique_ptr<BatchUploadSession> session_;
  std::vector<std::string> committed_ids_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_TENSOR_UPLOAD_REACTOR_H_
