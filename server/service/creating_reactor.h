// CreatingUnaryReactor: the unary reactor of calls that create tensors
// (Place, Assemble, Disassemble, collectives). Nothing stays committed that
// the caller did not get: when the call was cancelled (client cancel,
// deadline, peer gone) by the time the result is ready, the new tensors are
// deleted and the call ends CANCELLED; when the response could not be
// delivered (the call is found cancelled once done), they are deleted then,
// as an upload does.
//
// Lifetime: gRPC deletes nothing; OnDone deletes the reactor. Finish is
// called once, from any thread.
#ifndef PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_
#define PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

class CreatingUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  // REQUIRES: `store` outlives the call.
  CreatingUnaryReactor(grpc::CallbackServerContext* context, TensorStore* store)
      : context_(context), store_(store) {}

  // Ends the call with `status`; `created` are the ids the call committed
  // (ignored unless status is OK).
  void FinishCreating(absl::Status status, std::vector<std::string> created) {
    if (status.ok() && context_->IsCancelled()) {
      store_->Delete(created).IgnoreError();
      created.clear();
      status = absl::CancelledError(
          "the call was cancelled before its result was delivered; nothing was kept");
    }
    if (status.ok()) created_ = std::move(created);
    Finish(ToGrpcStatus(status));
  }

  void OnDone() override {
    if (!created_.empty() && context_->IsCancelled()) store_->Delete(created_).IgnoreError();
    delete this;
  }

 private:
  grpc::CallbackServerContext* const context_;
  TensorStore* const store_;
  std::vector<std::string> created_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_
