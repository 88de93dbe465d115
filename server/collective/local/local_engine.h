// LocalEngine: collectives over groups whose every rank is a host-addressable
// device of this process (CPU virtual devices: CpuBackend buffers are host
// memory, so every rank's buffer is directly addressable). Items must list
// every rank of their group (ValidateLocalItems); MEAN divides by the group
// size.
//
// Algorithm: the buffers are cut into chunks (chunk_bytes, default 256 KiB);
// the chunks of every item of a call form one task list that the calling
// thread and the shared WorkerPool drain together. For all-reduce, the task
// for chunk c reads chunk c of every rank once, reduces it in an L1-sized
// accumulator and writes the result once into every rank's receive buffer --
// a reduce-scatter (each chunk reduced by exactly one thread) fused with the
// all-gather of that chunk. That is the minimum traffic a shared-memory
// all-reduce can have (n reads + n writes per element, no temporaries, no
// extra copy of any buffer), so large tensors run at memory bandwidth.
// All-gather, reduce-scatter and broadcast use the same chunked task list.
//
// Fusion: a call with many items (a gradient batch, the groups of a mesh
// axis) is one task list, so small tensors share one dispatch.
//
// Cancellation: CollectiveContext::Check runs before every chunk; the first
// failure stops the remaining chunks and the call returns it once every
// in-flight chunk has finished (no thread touches the buffers afterwards).
//
// Thread-safe; concurrent calls share the pool (each caller also works on its
// own chunks, so calls never wait on each other to make progress).
#ifndef PLACEMENT_SERVER_COLLECTIVE_LOCAL_LOCAL_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_LOCAL_LOCAL_ENGINE_H_

#include <cstdint>
#include <memory>

#include "server/collective/collective_engine.h"
#include "server/common/worker_pool.h"

namespace placement::server {

struct LocalEngineOptions {
  // Pool threads besides each caller; -1 = WorkerPool::DefaultThreads().
  int num_threads = -1;
  // Bytes of one rank's buffer per task; rounded to whole elements.
  int64_t chunk_bytes = 256 << 10;
};

class LocalEngine final : public CollectiveEngine {
 public:
  explicit LocalEngine(const LocalEngineOptions& options = {});
  ~LocalEngine() override;

  absl::string_view Name() const override { return "local"; }
  bool CompletesInline() const override { return true; }
  absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                   const CollectiveContext& context) override;

  int num_threads() const { return pool_->num_threads(); }

 private:
  LocalEngineOptions options_;
  std::unique_ptr<WorkerPool> pool_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_LOCAL_LOCAL_ENGINE_H_
