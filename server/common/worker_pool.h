// WorkerPool: a small fixed set of threads that help callers run data-
// parallel loops (ParallelFor) and run queued jobs (Submit). Created once and
// shared by every call of an engine, so a collective never spawns threads.
//
// ParallelFor always runs tasks on the calling thread too, so a call makes
// progress even while every pool thread is busy with other calls: concurrent
// callers cannot deadlock each other, they only share the helpers.
//
// Thread-safe. The destructor finishes queued jobs and joins the threads.
#ifndef PLACEMENT_SERVER_COMMON_WORKER_POOL_H_
#define PLACEMENT_SERVER_COMMON_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

class WorkerPool {
 public:
  // REQUIRES: num_threads >= 0 (0: ParallelFor runs everything on the caller).
  explicit WorkerPool(int num_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int num_threads() const { return static_cast<int>(threads_.size()); }

  // Calls fn(t) exactly once for every t in [0, num_tasks), on the calling
  // thread and on up to max_parallelism - 1 pool threads, and returns when
  // all calls have returned. Tasks are claimed in increasing order.
  // REQUIRES: fn does not throw and does not call ParallelFor on this pool
  // from a pool thread.
  void ParallelFor(int64_t num_tasks, int max_parallelism, absl::FunctionRef<void(int64_t)> fn);

  // Queues `job` for a pool thread. REQUIRES: num_threads() > 0.
  void Submit(std::function<void()> job);

  // A sensible default size: hardware threads minus one (the caller), at
  // least 1, at most 15.
  static int DefaultThreads();

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COMMON_WORKER_POOL_H_
