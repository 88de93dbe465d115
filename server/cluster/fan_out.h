// Fan-out of one call to several daemons, and how to pick the error that
// explains a failed fan-out.
//
// Thread-safe (pure functions; `fn` runs concurrently).
#ifndef PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
#define PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
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
// one of `processes`) runs on the calling thread as `here`'s part. Returns once every call's `done`
// ran, then destroys the calls, and picks the error as FanOut does (in the order of `processes`,
// `here` included). REQUIRES: not called on a gRPC callback thread (a handler's or a reactor's):
// the calls complete on gRPC's threads, which a blocked caller could starve. The daemon calls it
// from its dispatch pool (collectives that span daemons never run inline). Up to this many
// processes a fan-out is cheaper with a thread each and blocking calls: on gRPC 1.51 a callback-API
// completion costs ~1 ms more per call on the 2-core VM (docs/benchmarks.md). Beyond, FanOutAsync.
inline constexpr size_t kMaxThreadedFanOut = 8;
using StartCall = std::function<std::unique_ptr<PeerTransport::PendingCall>(
    int32_t process, PeerTransport::Done done)>;
absl::Status FanOutAsync(const std::vector<int32_t>& processes, const StartCall& start,
                         int32_t here = -1,
                         const std::function<absl::Status()>& run_here = nullptr);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_FAN_OUT_H_
