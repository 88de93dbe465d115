// GlooRanks: cluster_bench's direct-Gloo baseline -- N Gloo ranks, each a
// thread of this process with its own Gloo TCP device and buffers,
// connected through an in-memory rendezvous on 127.0.0.1, running Gloo's
// ring all-reduce (f32 SUM) directly; optionally with what the daemons'
// cross-process data path (server/collective/transport/gloo/
// hierarchical_collectives.cc) does around the same Gloo call, so a
// benchmark can tell that data path's cost from the control plane's.
//
// Not thread-safe (Time runs its own threads).
#ifndef PLACEMENT_BENCH_GLOO_RANKS_H_
#define PLACEMENT_BENCH_GLOO_RANKS_H_

#if PLACEMENT_WITH_GLOO

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/collective/transport/rendezvous_store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace placement::bench {

// `n` Gloo contexts: ranks 0..n-1 of one full mesh on 127.0.0.1, each
// connected on a thread of its own through `store` under `prefix` (the
// benchmarks' direct-Gloo baselines call Gloo on them). Gloo's error when
// they cannot connect within `timeout`.
absl::StatusOr<std::vector<std::shared_ptr<gloo::Context>>> ConnectGlooContexts(
    server::RendezvousStore* store, int n, const std::string& prefix, absl::Duration timeout);

class GlooRanks {
 public:
  // Connects `n` ranks (a full mesh each); Gloo's error when they cannot.
  static absl::StatusOr<std::unique_ptr<GlooRanks>> Connect(int n);

  // What surrounds the Gloo call.
  enum class Staging {
    kNone,     // in place on the rank's buffer, gloo::sum: Gloo called directly
    kCopies,   // memcpy into a scratch kept across calls, all-reduced, memcpy out
    kKernels,  // as kCopies with the daemons' reduce kernels (ReduceToWire in,
               // GlooPairwiseReduce in Gloo)
    kFresh,    // the daemons' data path (hierarchical_collectives.cc) exactly:
               // as kKernels with a fresh scratch per call
  };

  // Mean seconds per all-reduce of `bytes` (whole f32 elements) per rank
  // over `iters` calls, every rank on its own thread; buffers are allocated
  // and touched before the clock starts.
  double Time(int64_t bytes, int iters, Staging staging);

 private:
  GlooRanks() = default;
  server::InMemoryRendezvousStore store_;
  std::vector<std::shared_ptr<gloo::Context>> contexts_;
};

}  // namespace placement::bench

#endif  // PLACEMENT_WITH_GLOO
#endif  // PLACEMENT_BENCH_GLOO_RANKS_H_
