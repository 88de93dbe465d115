// CreatingUnaryReactor: the unary reactor of calls that create tensors
// (Place, Assemble, Disassemble, collectives). Nothing stays committed that
// the caller did not get: when the call was cancelled (client cancel,
// deadline, peer gone) by the time the result is ready, the new tensors are
// deleted and the call ends CANCELLED; when the response could not be
// delivered (the call is found cancelled once done), they are deleted then,
// as an upload does.
//
// A response sent just before the caller's deadline may still arrive after
// it (the caller then sees DEADLINE_EXCEEDED while the daemon saw success).
// So a result ready less than kDeliveryMargin before the deadline is not
// kept either: the call ends DEADLINE_EXCEEDED.
//
// Lifetime: gRPC deletes nothing; OnDone deletes the reactor. Finish is
// called once, from any thread.
#ifndef PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_
#define PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// How close to the caller's deadline a result may be ready and still be
// kept (see the file comment).
inline constexpr absl::Duration kDeliveryMargin = absl::Milliseconds(20);

// Why a result ready now would not reach the caller of `context`: CANCELLED
// when the call was cancelled, DEADLINE_EXCEEDED when less than
// kDeliveryMargin is left before its deadline; OK otherwise. What every
// call that creates tensors checks before it answers (the uploads too).
inline absl::Status DeliveryStatus(grpc::CallbackServerContext& context) {
  if (context.IsCancelled()) {
    return absl::CancelledError(
        "the call was cancelled before its result was delivered; nothing was kept");
  }
  if (context.deadline() != std::chrono::system_clock::time_point::max() &&
      absl::FromChrono(context.deadline()) - absl::Now() < kDeliveryMargin) {
    return absl::DeadlineExceededError(absl::StrCat(
        "the result was ready less than ", absl::FormatDuration(kDeliveryMargin),
        " before the call's deadline and might not reach the caller in time; nothing was kept"));
  }
  return absl::OkStatus();
}

class CreatingUnaryReactor final : public grpc::ServerUnaryReactor {
 public:
  // REQUIRES: `store` outlives the call.
  CreatingUnaryReactor(grpc::CallbackServerContext* context, TensorStore* store)
      : context_(context), store_(store) {}

  // Ends the call with `status`; `created` are the ids the call committed
  // (ignored unless status is OK).
  void FinishCreating(absl::Status status, std::vector<std::string> created) {
    if (status.ok() && !created.empty()) {
      status = DeliveryStatus(*context_);
      if (!status.ok()) {
        store_->DeleteExisting(created);
        created.clear();
      }
    }
    if (status.ok()) created_ = std::move(created);
    Finish(ToGrpcStatus(status));
  }

  void OnDone() override {
    if (!created_.empty() && context_->IsCancelled()) store_->DeleteExisting(created_);
    delete this;
  }

 private:
  grpc::CallbackServerContext* const context_;
  TensorStore* const store_;
  std::vector<std::string> created_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_CREATING_REACTOR_H_
