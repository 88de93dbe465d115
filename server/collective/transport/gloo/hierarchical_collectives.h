// The four collectives over a group that spans processes, run
// hierarchically: this process combines its own ranks on the host, one Gloo
// participant per process moves the per-process results, and this process
// writes the outcome into its ranks' receive buffers. A process may hold any
// number k_p >= 1 of the ranks, k_p may differ between processes, and the
// ranks of different processes may interleave in the group.
// With B = block bytes and n = group size:
//   AllReduce:      the k_p sends are reduced into a host scratch in the
//                   wire dtype (wire_reduction.h), Gloo all-reduces the
//                   scratch, the result is finished once and written to
//                   every local recv.
//   AllGather:      the local sends are packed in rank order at this
//                   process's place of a scratch, an all-gather across
//                   processes (recursive doubling or Gloo's allgatherv,
//                   see recursive_doubling.h) fills in the k_q * B bytes
//                   of every other process, and every
//                   local recv receives all n blocks at rank * B.
//   ReduceScatter:  as AllReduce over the whole n * B send, then each local
//                   rank copies block `rank`. Gloo 0.5 has no options-style
//                   reduce-scatter, so every process moves the full n * B:
//                   twice the traffic of a true reduce-scatter.
//   Broadcast:      the root rank's process reads the root's send, the
//                   bytes go around the ring from that process's position
//                   (RingBroadcast, gloo_ring_context.h) -- up to
//                   kRecursiveDoublingMaxBytes by recursive doubling
//                   instead -- and every local recv gets them.
// Every Gloo operation here touches only the pairs of a GlooRingContext:
// Gloo's ring all-reduce and allgatherv, RingBroadcast, and recursive
// doubling (recursive_doubling.h) for all-reduces and broadcasts of up to
// kRecursiveDoublingMaxBytes and for all-gathers (over a power-of-two
// number of processes, or of blocks up to that size).
// An item with B = 0 moves nothing (every process sees the same B).
//
// Thread-compatible: concurrent calls must use different Gloo contexts.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_HIERARCHICAL_COLLECTIVES_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_HIERARCHICAL_COLLECTIVES_H_

#include <chrono>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "server/collective/cluster/cluster_item.h"
#include "server/collective/cluster/rank_buffer_io.h"
#include "server/collective/collective_engine.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace placement::server {

// Where and how one Gloo operation runs.
struct GlooOperation {
  // Connected over plan.processes, with Gloo rank plan.position: at least
  // the ring neighbours (GlooRingContext).
  std::shared_ptr<gloo::Context> context;
  // Must be the same on every process of the subset.
  uint32_t tag = 0;
  std::chrono::milliseconds timeout{1};
};

// Runs `kind` over `item` as planned by PlanClusterItem on this process.
// Every process of plan.processes must run the same item with the same tag.
// Returns the backend's status when a rank buffer cannot be read or
// written; Gloo failures propagate as Gloo's exceptions (gloo::IoException
// for timeouts and lost peers), for the caller to turn into a status and to
// drop the context.
absl::Status RunHierarchical(CollectiveKind kind, const CollectiveItem& item,
                             const ClusterItemPlan& plan, const GlooOperation& op,
                             RankBufferIo& io);

// The Gloo rank whose success in RunHierarchical(kind, ...) shows that
// every process of plan.processes was connected and inside the operation:
// 0 for the reductions, the all-gather and a recursive-doubling broadcast
// (every rank's result holds every process's part: any rank would do),
// root - 1 for a ring broadcast (the last of the ring), -1 for an item with
// B = 0 (nothing moves).
int WitnessRank(CollectiveKind kind, const ClusterItemPlan& plan);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_HIERARCHICAL_COLLECTIVES_H_
