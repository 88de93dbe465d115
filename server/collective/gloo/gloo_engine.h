// GlooEngine: collectives on CPU buffers across processes (and nodes)
// through Gloo's TCP transport -- the engine for CPU meshes that span
// daemons, where LocalEngine cannot reach the other ranks' memory.
//
// One engine is one rank of a Gloo context of `size` processes. Create()
// publishes this rank's address in a RendezvousStore under `prefix` and
// connects a full mesh to the other ranks (every rank must call it with the
// same prefix and size; it blocks until all have joined or `timeout`).
//
// Items (collective_engine.h): `local` lists the k contributions THIS
// process makes, `group` every rank of every process, so every process
// must contribute the same number: group size n = size * k.
//   AllReduce:      k >= 1 local buffers; each recv gets the op over all
//                   n contributions (MEAN divides by n, as everywhere).
//   AllGather:      k == 1 and group rank r is Gloo rank r; recv is size * B:
//                   rank r's block at r * B.
//   ReduceScatter:  k == 1 (rank r = Gloo rank r); send is size * B, recv gets block `rank` of the
//                   reduction (Gloo 0.5 has no options-style reduce-scatter,
//                   so this is an all-reduce into a scratch copy followed by
//                   a copy of this rank's block: 2x the optimal traffic).
//   Broadcast:      k == 1 (rank r = Gloo rank r); send is read on `root`.
// Reductions combine pairs with the LocalEngine's kernels (16-bit floats are
// rounded to their dtype after every pairwise step, unlike the LocalEngine's
// f32 accumulation); MEAN sums, then divides locally.
//
// Tags and ordering: every process must issue the same calls in the same
// order. CollectiveContext::tag, when set, becomes the Gloo tag of every
// operation of the call; otherwise the engine numbers calls 1, 2, 3, ...
// Timeouts: each operation gets min(timeout, time left before the call's
// deadline); Gloo's timeout surfaces as DEADLINE_EXCEEDED. Cancellation is
// checked between items (a running Gloo operation cannot be interrupted).
// Other Gloo I/O errors are UNAVAILABLE with Gloo's text. After a timeout or
// an I/O error the connections are in an unknown state: create a new engine
// (a new rendezvous prefix) rather than issuing more calls on this one.
//
// Thread-safe: calls are serialised on the context (Gloo requires matching
// operation order on every rank).
#ifndef PLACEMENT_SERVER_COLLECTIVE_GLOO_GLOO_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_GLOO_GLOO_ENGINE_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/collective_engine.h"
#include "server/collective/gloo/rendezvous_store.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace placement::server {

struct GlooEngineOptions {
  int rank = 0;
  int size = 1;
  // REQUIRES: outlives Create (not used afterwards).
  RendezvousStore* store = nullptr;
  // Namespace of this context's keys; several contexts may share a store.
  std::string prefix = "placement/gloo";
  // Address this rank listens on (an interface IP or hostname).
  std::string hostname = "127.0.0.1";
  // Rendezvous / connection timeout and the default per-operation timeout.
  absl::Duration timeout = absl::Seconds(30);
  // All-reduce algorithm of Gloo's options-style API.
  enum class Algorithm { kRing, kBcube };
  Algorithm algorithm = Algorithm::kRing;
};

class GlooEngine final : public CollectiveEngine {
 public:
  // INVALID_ARGUMENT for size < 1, rank outside [0, size) or no store;
  // DEADLINE_EXCEEDED when the other ranks do not join within `timeout`;
  // UNAVAILABLE when the transport cannot be set up.
  static absl::StatusOr<std::unique_ptr<GlooEngine>> Create(const GlooEngineOptions& options);
  ~GlooEngine() override;

  absl::string_view Name() const override { return "gloo"; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The connected Gloo context (the benchmark runs Gloo's own algorithms on
  // it as a baseline).
  std::shared_ptr<gloo::Context> context() const { return context_; }

  absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                   const CollectiveContext& context) override;

 private:
  GlooEngine(const GlooEngineOptions& options, std::shared_ptr<gloo::Context> context);

  void RunItem(CollectiveKind kind, const CollectiveItem& item, uint32_t tag,
               std::chrono::milliseconds timeout);

  int rank_;
  int size_;
  absl::Duration timeout_;
  GlooEngineOptions::Algorithm algorithm_;
  std::shared_ptr<gloo::Context> context_;
  absl::Mutex mu_;
  uint32_t next_tag_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_GLOO_GLOO_ENGINE_H_
