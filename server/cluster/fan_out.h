// Fan-out of one call to several daemons, and how to pick the error that
// explains a failed fan-out.
//
// Thread-safe (pure functions; the calls' `done` may run on other threads).
#ifndef PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
#define PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/cluster/peer_transport.h"

namespace placement::server {

// Whether `status` is what a process sees when a peer failed or vanished
// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, ABORTED) rather than a
// failure of its own (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...).
bool IsConsequence(const absl::Status& status);

// Marks `status` as a transport failure of a call to `process` (a peer
// transport does, for a call that could not reach its process): evidence
// that the process vanished.
void MarkUnreachable(absl::Status& status, int32_t process);
// Whether `status` was marked by MarkUnreachable.
bool IsUnreachable(const absl::Status& status);

// Starts an asynchronous call to every process of `processes` but `here`
// (start(p, done): PeerTransport's Start* forms) and, meanwhile, runs
// run_here() (when given, and `here` is one of `processes`) on the calling
// thread as `here`'s part. Then it waits for every call
// (PendingCall::Wait, then its `done`), destroys the calls, and returns the
// first error (in the order of `processes`, `here` included) that is not a
// consequence of another's (IsConsequence), else the first that could not
// reach its process (IsUnreachable: it names the one that vanished; the
// others only saw its consequences, a closed connection), else the first
// UNAVAILABLE or ABORTED (a part told of a loss or refused: it says why the
// others' waits ran out), else the first.
// No thread per process: a driver of many daemons holds one thread.
// `succeeded`, when given, is set to how many parts returned OK.
// A transport that completes calls on threads of its own rather than in
// Wait must not be waited for from those threads (a gRPC callback thread,
// for the callback API): a blocked caller could starve them. PeerClient
// completes its calls in Wait, so any thread may wait.
using StartCall = std::function<std::unique_ptr<PeerTransport::PendingCall>(
    int32_t process, PeerTransport::Done done)>;
absl::Status FanOutAsync(const std::vector<int32_t>& processes, const StartCall& start,
                         int32_t here = -1, const std::function<absl::Status()>& run_here = nullptr,
                         int* succeeded = nullptr);

// This daemon's own part of a fan-out: run() on the calling thread when
// `process` is one of the fan-out's processes (no call goes to it).
struct OwnPart {
  int32_t process = -1;
  std::function<absl::Status()> run;
};

namespace fan_out_internal {

template <typename... T>
struct TypeList {};

// The parameters of a Start* form between the process and the Done:
// StartArgs<TypeList<>, P...>::type for a form taking (int32_t, P...).
template <typename Kept, typename... Rest>
struct StartArgs;
template <typename... Kept>
struct StartArgs<TypeList<Kept...>, PeerTransport::Done> {
  using type = TypeList<Kept...>;
};
template <typename... Kept, typename Next, typename... Rest>
struct StartArgs<TypeList<Kept...>, Next, Rest...> : StartArgs<TypeList<Kept..., Next>, Rest...> {};

template <typename Args>
class PeerCallFanOut;
template <typename... Args>
class PeerCallFanOut<TypeList<Args...>> {
 public:
  using Start = std::unique_ptr<PeerTransport::PendingCall> (PeerTransport::*)(int32_t, Args...,
                                                                               PeerTransport::Done);
  PeerCallFanOut(PeerTransport* peers, const std::vector<int32_t>& processes, OwnPart own,
                 Start start)
      : peers_(peers), processes_(processes), own_(std::move(own)), start_(start) {}
  // The same fan-out, setting `*succeeded` to how many parts returned OK.
  PeerCallFanOut Counting(int* succeeded) const {
    PeerCallFanOut counting = *this;
    counting.succeeded_ = succeeded;
    return counting;
  }
  // The arguments as the Start* form takes them (braced lists work).
  absl::Status operator()(Args... args) const {
    return FanOutAsync(
        processes_,
        [&](int32_t p, PeerTransport::Done done) {
          return (peers_->*start_)(p, args..., std::move(done));
        },
        own_.process, own_.run, succeeded_);
  }

 private:
  PeerTransport* const peers_;
  const std::vector<int32_t>& processes_;  // outlives the expression's call
  const OwnPart own_;
  const Start start_;
  int* succeeded_ = nullptr;
};

}  // namespace fan_out_internal

// FanOutAsync of one PeerTransport call to every process of `processes`
// (`own`'s through own.run), named by its Start* form; the result is called
// with the call's arguments, once, in the same expression:
//   FanOutCall(peers, processes, &PeerTransport::StartAbort)(ids);
// A Start* form's value other than its status is dropped.
template <typename... P>
fan_out_internal::PeerCallFanOut<
    typename fan_out_internal::StartArgs<fan_out_internal::TypeList<>, P...>::type>
FanOutCall(PeerTransport* peers, const std::vector<int32_t>& processes, const OwnPart& own,
           std::unique_ptr<PeerTransport::PendingCall> (PeerTransport::*start)(int32_t, P...)) {
  return {peers, processes, own, start};
}
template <typename... P>
fan_out_internal::PeerCallFanOut<
    typename fan_out_internal::StartArgs<fan_out_internal::TypeList<>, P...>::type>
FanOutCall(PeerTransport* peers, const std::vector<int32_t>& processes,
           std::unique_ptr<PeerTransport::PendingCall> (PeerTransport::*start)(int32_t, P...)) {
  return {peers, processes, OwnPart{}, start};
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
