// Fan-out of one call to several daemons, and how to pick the error that
// explains a failed fan-out.
//
// Thread-safe (pure functions; `fn` and `call` run concurrently).
#ifndef PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
#define PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
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

// Runs fn(p) for every process in `processes` on threads of its own and,
// every call finished, returns the first error (by process order) that is
// not a consequence of another's (IsConsequence), else the first that could
// not reach its process (IsUnreachable: it names the one that vanished;
// the others only saw its consequences, a closed connection), else the
// first.
absl::Status FanOut(const std::vector<int32_t>& processes,
                    const std::function<absl::Status(int32_t)>& fn);

// The same without a thread per process: start(p, done) starts an
// asynchronous call to every process but `here` (PeerTransport's Start*
// forms) and returns it; meanwhile run_here() (when given, and `here` is
// one of `processes`) runs on the calling thread as `here`'s part. Then it
// waits for every call (PendingCall::Wait, then its `done`), destroys the
// calls, and picks the error as FanOut does (in the order of `processes`,
// `here` included). A transport that completes calls on threads of its own
// rather than in Wait must not be waited for from those threads (a gRPC
// callback thread, for the callback API): a blocked caller could starve
// them. PeerClient completes its calls in Wait, so any thread may wait.
using StartCall = std::function<std::unique_ptr<PeerTransport::PendingCall>(
    int32_t process, PeerTransport::Done done)>;
absl::Status FanOutAsync(const std::vector<int32_t>& processes, const StartCall& start,
                         int32_t here = -1,
                         const std::function<absl::Status()>& run_here = nullptr);

// Up to this many processes a fan-out runs a thread each with blocking
// calls; beyond, FanOutAsync. 0: every fan-out is asynchronous. The
// threaded form was the default while the asynchronous one ran on gRPC
// 1.51's callback API (~1 ms more per call on the 2-core VM); on
// PeerClient's completion queue the two cost the same between 4 daemons
// (docs/benchmarks.md "Asynchronous fan-out in daemons"), so no thread per
// peer is the default.
inline constexpr size_t kMaxThreadedFanOut = 0;

// This process's threshold: kMaxThreadedFanOut unless a daemon set another
// (--cluster_max_threaded_fan_out; the tests that cover the threaded form in
// real daemons set 8). Thread-safe.
size_t MaxThreadedFanOut();
void SetMaxThreadedFanOut(size_t max_threaded);

// One fan-out of a peer call given both its forms: up to `max_threaded`
// processes FanOut with the blocking `call`, beyond FanOutAsync with
// `start`. `here`'s part (when `here` is one of `processes`) is run_here()
// either way, and no call goes to `here`. The error is picked as FanOut
// picks it.
absl::Status FanOutPeers(const std::vector<int32_t>& processes,
                         const std::function<absl::Status(int32_t)>& call, const StartCall& start,
                         int32_t here = -1, const std::function<absl::Status()>& run_here = nullptr,
                         size_t max_threaded = MaxThreadedFanOut());

// The Start* form of a PeerTransport call whose blocking form takes
// `Args` (spelled out of deduction: the blocking form names them).
template <typename... Args>
using StartForm = std::type_identity_t<std::unique_ptr<PeerTransport::PendingCall> (
    PeerTransport::*)(int32_t, Args..., PeerTransport::Done)>;

// This daemon's own part of a fan-out: run() on the calling thread when
// `process` is one of the fan-out's processes (no call goes to it).
struct OwnPart {
  int32_t process = -1;
  std::function<absl::Status()> run;
};

// FanOutPeers of one PeerTransport call to every process of `processes`
// (`own`'s through own.run), named by its two forms and given their
// arguments once:
//   FanOutCall(peers, processes, &PeerTransport::Abort, &PeerTransport::StartAbort, ids);
// A blocking form's value other than its status is dropped.
template <typename Result, typename... Args>
absl::Status FanOutCall(PeerTransport* peers, const std::vector<int32_t>& processes,
                        const OwnPart& own, Result (PeerTransport::*call)(int32_t, Args...),
                        StartForm<Args...> start, std::type_identity_t<Args>... args) {
  return FanOutPeers(
      processes,
      [&](int32_t p) -> absl::Status {
        if constexpr (std::is_same_v<Result, absl::Status>) {
          return (peers->*call)(p, args...);
        } else {
          return (peers->*call)(p, args...).status();
        }
      },
      [&](int32_t p, PeerTransport::Done done) {
        return (peers->*start)(p, args..., std::move(done));
      },
      own.process, own.run);
}
template <typename Result, typename... Args>
absl::Status FanOutCall(PeerTransport* peers, const std::vector<int32_t>& processes,
                        Result (PeerTransport::*call)(int32_t, Args...), StartForm<Args...> start,
                        std::type_identity_t<Args>... args) {
  return FanOutCall(peers, processes, OwnPart{}, call, start, args...);
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
