// PrefetchManager: the daemon's open prefetch streams. It creates their
// pipelines over the tensor service's core (TensorOps), owns the daemon-wide
// prefetch metrics, and on shutdown asks every open stream to stop, so the
// gRPC server is not held up by long-lived streams.
//
// Created by ServiceSet; outlives every stream (the gRPC server is stopped
// before the ServiceSet is destroyed). Thread-safe.
#ifndef PLACEMENT_SERVER_PREFETCH_PREFETCH_MANAGER_H_
#define PLACEMENT_SERVER_PREFETCH_PREFETCH_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/metrics.h"
#include "server/prefetch/prefetch_metrics.h"
#include "server/prefetch/prefetch_pipeline.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

class PrefetchManager {
 public:
  // Called with UNAVAILABLE when the daemon shuts down.
  using AbortFn = std::function<void(const absl::Status&)>;

  // REQUIRES: ops outlives the manager; metrics (may be null) too.
  PrefetchManager(const TensorOps* ops, Metrics* metrics);
  const TensorOps* ops() const { return ops_; }
  ~PrefetchManager();

  // Registers an open stream and returns its id. UNAVAILABLE once
  // StartShutdown ran. `abort` runs at most once, under the manager's lock:
  // it must not call back into the manager.
  absl::StatusOr<int64_t> Register(AbortFn abort, std::string tenant = {});
  // After this returns, the stream's `abort` is not running and never runs.
  void Unregister(int64_t id);

  std::unique_ptr<PrefetchPipeline> NewPipeline(PrefetchConfig config);

  // Aborts every registered stream with UNAVAILABLE and refuses new ones.
  void StartShutdown();

  PrefetchMetrics* metrics() { return &metrics_; }
  int64_t open_streams() const;
  // Streams open now that `tenant` registered.
  int64_t open_streams(const std::string& tenant) const;

 private:
  const TensorOps* ops_;
  PrefetchMetrics metrics_;
  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
  struct Stream {
    AbortFn abort;
    std::string tenant;
  };
  std::map<int64_t, Stream> streams_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PREFETCH_PREFETCH_MANAGER_H_
