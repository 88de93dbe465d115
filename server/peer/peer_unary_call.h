// PeerUnaryCall: one unary call to another daemon's PeerService on gRPC's
// completion-queue API, as a PeerTransport::PendingCall. The call owns its
// PeerCall (context, deadline, loss guard), request, response and a
// completion queue of its own; Wait drains that queue on the waiting
// thread and runs `then` there. No gRPC thread runs `then`, so a waiter
// may be one of gRPC's callback threads (a handler): with the callback API
// a handler that waits could starve the very threads that complete its
// calls (gRPC 1.51 runs callbacks on two threads on a 2-core host). Every
// blocking form of a peer call is its Start form then Wait (AwaitPeerCall),
// so both forms run the same code.
//
// One call per object; Wait from one thread.
#ifndef PLACEMENT_SERVER_PEER_PEER_UNARY_CALL_H_
#define PLACEMENT_SERVER_PEER_PEER_UNARY_CALL_H_

#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/peer_service.grpc.pb.h"
#include "server/cluster/peer_transport.h"
#include "server/peer/peer_call.h"

namespace placement::server {

// The method of PeerService's completion-queue interface that takes
// `Request` and answers `Response` (Stub::PrepareAsync<Method>).
template <typename Request, typename Response>
using PeerMethod = std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> (
    placement::v1::PeerService::Stub::*)(grpc::ClientContext*, const Request&,
                                         grpc::CompletionQueue*);

template <typename Request, typename Response>
class PeerUnaryCall final : public PeerTransport::PendingCall {
 public:
  using Method = PeerMethod<Request, Response>;
  // The call's outcome (PeerCall::Finish) and its response (meaningful when
  // OK).
  using Then = std::function<void(absl::Status, Response&)>;

  // Starts `method` with `request` to `process`, bounded by `timeout`;
  // `then` runs once, in Wait. REQUIRES: channels and cluster outlive the
  // call.
  static std::unique_ptr<PeerUnaryCall> Start(PeerChannels* channels, Cluster* cluster,
                                              int32_t process, absl::Duration timeout,
                                              Method method, Request request, Then then) {
    std::unique_ptr<PeerUnaryCall> self(new PeerUnaryCall(channels, cluster, process, timeout,
                                                          std::move(request), std::move(then)));
    self->reader_ =
        (self->call_.stub()->*method)(self->call_.context(), self->request_, &self->queue_);
    self->reader_->StartCall();
    self->reader_->Finish(&self->response_, &self->status_, self.get());
    return self;
  }

  ~PeerUnaryCall() override { Wait(); }

  // Returns once the call ended (answered, failed, past its deadline or
  // cancelled by the loss guard) and `then` ran on this thread.
  void Wait() override {
    if (waited_) return;
    waited_ = true;
    void* tag = nullptr;
    bool ok = false;
    // The call's one event: Finish.
    queue_.Next(&tag, &ok);
    then_(call_.Finish(status_), response_);
    queue_.Shutdown();
    while (queue_.Next(&tag, &ok)) {
    }
  }

 private:
  PeerUnaryCall(PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout,
                Request request, Then then)
      : call_(channels, cluster, process, timeout),
        request_(std::move(request)),
        then_(std::move(then)) {}

  // Declared first: the call (call_'s context) ends before its queue goes.
  grpc::CompletionQueue queue_;
  PeerCall call_;
  Request request_;
  Response response_;
  grpc::Status status_;
  // Lives in the call's arena: released before call_.
  std::unique_ptr<grpc::ClientAsyncResponseReader<Response>> reader_;
  Then then_;
  bool waited_ = false;
};

// The blocking form of a Start form: `start` is handed a `done` that keeps
// the result; waits for the call and returns that result. Every blocking
// peer call is one (CallPeer, PeerClient's blocking methods).
template <typename Result, typename StartFn>
Result AwaitPeerCall(StartFn&& start) {
  std::optional<Result> out;
  std::forward<StartFn>(start)([&out](Result result) { out = std::move(result); })->Wait();
  return *std::move(out);
}

// PeerUnaryCall::Start with the types deduced from `method`, and its
// blocking form (the response or the call's error).
template <typename Request, typename Response>
std::unique_ptr<PeerTransport::PendingCall> StartPeerCall(
    PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout,
    PeerMethod<Request, Response> method, std::type_identity_t<Request> request,
    std::type_identity_t<typename PeerUnaryCall<Request, Response>::Then> then) {
  return PeerUnaryCall<Request, Response>::Start(channels, cluster, process, timeout, method,
                                                 std::move(request), std::move(then));
}
template <typename Request, typename Response>
absl::StatusOr<Response> CallPeer(PeerChannels* channels, Cluster* cluster, int32_t process,
                                  absl::Duration timeout, PeerMethod<Request, Response> method,
                                  std::type_identity_t<Request> request) {
  using Result = absl::StatusOr<Response>;
  return AwaitPeerCall<Result>([&](std::function<void(Result)> done) {
    return PeerUnaryCall<Request, Response>::Start(
        channels, cluster, process, timeout, method, std::move(request),
        [done = std::move(done)](absl::Status status, Response& response) {
          done(status.ok() ? Result(std::move(response)) : Result(std::move(status)));
        });
  });
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_UNARY_CALL_H_
