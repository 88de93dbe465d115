// GlooRingContext: a Gloo context in which each rank is connected only to
// the ranks the transport's algorithms exchange with -- its ring neighbours,
// rank - 1 and rank + 1 (mod size), for Gloo's ring algorithms and
// RingBroadcast, and its recursive-doubling partners (recursive_doubling.h:
// rank XOR 2^i below the largest power of two P <= size, and rank +- P) for
// the small-payload all-reduce and all-gather. A rank holds at most
// log2(size) + 3 pairs instead of size - 1 (at most 9 of 127 at 128; all
// the others up to size 4), and getPair(r) of any other rank is null.
//
// Rendezvous: every rank publishes ONE key, "<prefix>/ring/<rank>", whose
// value lists the address of each of its pairs tagged with the peer rank the
// pair is for, and reads only its neighbours' keys: Neighbours(r).size()
// store reads per rank, O(N log N) for the whole context, where Gloo's
// connectFullMesh reads ~2(N-1) keys per rank (each peer's key waited on
// and then read, plus every lower rank's hostname) and opens N(N-1)/2
// connections.
//
// What may run on such a context (the contract the transport keeps,
// checked against Debian's Gloo, 0.0~git20220518.5b14351): gloo::allreduce
// with Algorithm::RING, gloo::allgather and gloo::allgatherv send only to
// rank + 1 and receive only from rank - 1 (or the reverse), and check that
// those pairs exist; RecursiveDoublingAllReduce / AllGather use only the
// recursive-doubling pairs; gloo::broadcast is a binomial tree rooted at
// any rank (rank XOR 2^i relative to the root) and must not run here
// (RingBroadcast below does); BCUBE, halving-doubling, barrier, gather,
// scatter, alltoall and ContextFactory need pairs this context may not
// have. Code that walks every pair (gloo::Context::closeConnections, the
// TCP context's signalException behind AbortGlooContext, the destructors)
// skips null pairs.
//
// Requires Gloo. Thread-safety: as gloo::Context (one operation at a time
// per context; AbortGlooContext from any thread).
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_RING_CONTEXT_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_RING_CONTEXT_H_

#include <gloo/context.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/collective/transport/abortable_rendezvous_store.h"
#include "server/collective/transport/gloo/abortable_transport_context.h"
#include "server/collective/transport/rendezvous_store.h"

namespace gloo::transport {
class Device;
}  // namespace gloo::transport

namespace placement::server {

class GlooRingContext final : public gloo::Context {
 public:
  // The ranks `rank` is connected to in a context of `size`, ascending,
  // without `rank` itself: {rank - 1, rank + 1} mod size and
  // RecursiveDoublingPartners(rank, size). Symmetric: b is a neighbour of a
  // iff a is a neighbour of b.
  // REQUIRES: 0 <= rank < size.
  static std::vector<int> Neighbours(int rank, int size);

  // Rank `rank` of a ring context of `size` over `device`, connected through
  // `store` under `prefix` (keys "<prefix>/ring/<r>"; deleting
  // "<prefix>/" removes them). Each neighbour's key is awaited until
  // `budget` after the call began, each pair's connection up to `budget`
  // more (Gloo waits 5x the context timeout, which is budget / 5; the
  // context keeps that timeout for operations that set none).
  // REQUIRES: 0 <= rank < size; every rank of the context calls Connect
  // with the same prefix and size.
  // Errors:
  //   DEADLINE_EXCEEDED from the store when a neighbour did not publish its
  //     key within `budget`; the store's other errors as they are;
  //   UNAVAILABLE when a neighbour's key holds no address for this rank;
  //   GlooErrorStatus for Gloo's exceptions (DEADLINE_EXCEEDED for a connect
  //     timeout, UNAVAILABLE otherwise);
  //   `abort`'s status once it was aborted: its Abort also ends Gloo's
  //     connect to the neighbours (which the store cannot interrupt), closing
  //     the pairs (OnAbort).
  static absl::StatusOr<std::shared_ptr<gloo::Context>> Connect(
      RendezvousStore& store, const std::string& prefix, int rank, int size,
      std::shared_ptr<gloo::transport::Device> device, absl::Duration budget,
      RendezvousAbort* abort = nullptr);

  GlooRingContext(int rank, int size) : gloo::Context(rank, size) {}

  // AbortableTransportContext::Abort: every pair closes and every operation
  // in flight ends, throwing gloo::IoException (`why`), the transfers Gloo
  // leaves waiting included; returns true. False (nothing done) before
  // Connect succeeded.
  bool Abort(const std::string& why);

 private:
  absl::Status ConnectThrowing(RendezvousStore& store, const std::string& prefix,
                               std::shared_ptr<gloo::transport::Device> device,
                               absl::Duration budget, RendezvousAbort* abort);
};

// Broadcasts `bytes` bytes at `data` from Gloo rank `root` of `context`
// around the ring: the root sends to rank + 1, every other rank receives
// from rank - 1 and forwards to rank + 1 unless that is the root, in chunks
// of at most 1 MiB so that forwarding overlaps receiving: size - 1 hops
// (Gloo's binomial tree takes log2(size), but needs pairs a ring context of
// size >= 4 does not have). The last rank, root - 1, returns only after
// every other rank passed the bytes on or sent them: its success shows that
// every rank was connected and inside the operation. It then tells the root
// (one byte, one hop), and the root returns only after that: the root's
// success, too, shows that every rank has the bytes. Uses Gloo's broadcast
// slots for `tag`, and a slot of its own with `tag` for the acknowledgement. Gloo failures throw,
// as in Gloo's own collectives (gloo::IoException; a wait longer than `timeout` fails the context).
// REQUIRES: the pairs to rank - 1 and rank + 1 exist; every rank calls it
// with the same root, size and tag.
void RingBroadcast(gloo::Context& context, int root, void* data, size_t bytes, uint32_t tag,
                   std::chrono::milliseconds timeout);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_RING_CONTEXT_H_
