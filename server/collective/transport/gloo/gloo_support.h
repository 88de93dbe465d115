// Glue between the daemon and Gloo for the Gloo transport (and the
// benchmarks' direct-Gloo baselines): a RendezvousStore seen through Gloo's
// exception-based store interface, Gloo's typed setters fed by a DType, the
// pairwise reduction Gloo calls with our kernels, and Gloo exceptions turned
// into absl::Status.
//
// Requires Gloo (built only with PLACEMENT_WITH_GLOO). Thread-safety: the
// free functions are pure; a StoreAdapter is as thread-safe as its store.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_SUPPORT_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_SUPPORT_H_

#include <gloo/allreduce.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/context.h>
#include <gloo/transport/unbound_buffer.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "common/dtype.h"
#include "common/reduce_op.h"
#include "server/collective/transport/rendezvous_store.h"

namespace placement::server {

// Fails every pair of `context` at once: an operation of any thread
// inside it throws Gloo's IoException, and the pairs close (their peers see
// the connection reset). A GlooRingContext over TCP (every context the
// transport makes) also ends the transfers Gloo itself leaves waiting
// (abortable_transport_context.h); any other context is failed through Gloo's
// application timeout ("Application timeout caused pair closure"), which
// does not reach those.
void AbortGlooContext(gloo::Context& context);

// Fails every pair of `transport` the one way Gloo offers: an application-
// side timeout (a one-byte buffer of it waits 1 ms for a receive nobody
// posted), on which the TCP transport signals every pending operation on
// its pairs and closes them. A pair that already failed keeps its error.
void FailEveryPair(gloo::transport::Context& transport);

// An unbound buffer's waitSend / waitRecv, throwing gloo::IoException
// (naming `what`) where Gloo returns false (the wait was aborted), as
// Gloo's own failures throw.
void WaitSendOrThrow(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout,
                     const char* what);
void WaitRecvOrThrow(gloo::transport::UnboundBuffer& buffer, std::chrono::milliseconds timeout,
                     const char* what);

// A RendezvousStore failure carried through Gloo's store interface, so the
// caller of a rendezvous can return the store's own status (for example
// DEADLINE_EXCEEDED naming the key nobody published).
struct GlooStoreFailure : public gloo::IoException {
  explicit GlooStoreFailure(absl::Status s)
      : gloo::IoException(s.ToString()), status(std::move(s)) {}
  absl::Status status;
};

// Gloo's rendezvous store over a RendezvousStore. Each read waits up to
// `timeout` (or the longer timeout Gloo passes to wait()), and never past
// `deadline`: a rendezvous that must finish by a point in time passes it,
// InfiniteFuture leaves only the per-read timeouts. Failures throw
// GlooStoreFailure.
// REQUIRES: `store` outlives the adapter.
class GlooStoreAdapter final : public gloo::rendezvous::Store {
 public:
  GlooStoreAdapter(RendezvousStore* store, absl::Duration timeout,
                   absl::Time deadline = absl::InfiniteFuture())
      : store_(store), timeout_(timeout), deadline_(deadline) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  absl::Duration Bounded(absl::Duration timeout) const;

  RendezvousStore* store_;
  absl::Duration timeout_;
  absl::Time deadline_;
};

// Whole milliseconds of `d`, at least 1 (Gloo reads 0 as "no timeout").
std::chrono::milliseconds GlooMilliseconds(absl::Duration d);

// The numeric address ("127.0.0.1", "::1") of the first address of
// `hostname` that a TCP socket can bind, as Gloo's transport would pick it.
// Hand Gloo this instead of a name: Gloo 0.5 reads uninitialised memory
// (and may crash) when getaddrinfo fails. UNAVAILABLE naming the host and
// the resolver's or bind's error otherwise.
absl::StatusOr<std::string> ResolveGlooAddress(const std::string& hostname);

// Gloo's typed setters only use sizeof(T): calls fn(T{}) with an unsigned
// type of the dtype's width, so callers pass element counts.
template <typename Fn>
void WithGlooElementType(DType dtype, Fn&& fn) {
  switch (DTypeSize(dtype)) {
    case 1:
      return fn(uint8_t{});
    case 2:
      return fn(uint16_t{});
    case 4:
      return fn(uint32_t{});
    default:
      return fn(uint64_t{});
  }
}

// Gloo's pairwise reduction with the host kernels (ReduceInto) in `dtype`;
// MEAN combines as SUM (the caller divides once at the end).
// REQUIRES: IsReducible(dtype).
gloo::AllreduceOptions::Func GlooPairwiseReduce(DType dtype, ReduceOp op);

// Whether Gloo's message reports a timeout ("Timed out waiting 300ms for
// recv operation to complete", "Connect timeout ...", "Application timeout
// caused pair closure").
bool IsGlooTimeout(absl::string_view what);

// DEADLINE_EXCEEDED for a Gloo timeout, else UNAVAILABLE (an I/O error: a
// peer died or closed its side); the message is `prefix: what`.
absl::Status GlooErrorStatus(absl::string_view prefix, absl::string_view what);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_SUPPORT_H_
