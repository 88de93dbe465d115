#include "server/common/worker_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

namespace placement::server {
namespace {

// Shared between a ParallelFor caller and its helpers. Helpers that start
// after every task was claimed only read `next`, so the state outlives the
// caller's frame through the shared_ptr while `fn` (a reference into that
// frame) is only touched for claimed tasks, all of which finish before the
// caller returns.
struct LoopState {
  int64_t num_tasks = 0;
  absl::FunctionRef<void(int64_t)>* fn = nullptr;
  std::atomic<int64_t> next{0};
  absl::Mutex mu;
  int64_t done ABSL_GUARDED_BY(mu) = 0;

  void RunTasks() {
    int64_t finished = 0;
    for (int64_t t = next.fetch_add(1); t < num_tasks; t = next.fetch_add(1)) {
      (*fn)(t);
      ++finished;
    }
    if (finished > 0) {
      absl::MutexLock lock(&mu);
      done += finished;
    }
  }
};

}  // namespace

WorkerPool::WorkerPool(int num_threads) {
  threads_.reserve(std::max(0, num_threads));
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { Loop(); });
}

WorkerPool::~WorkerPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

int WorkerPool::DefaultThreads() {
  const int hw = static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(hw - 1, 1, 15);
}

void WorkerPool::Submit(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  jobs_.push_back(std::move(job));
}

void WorkerPool::Loop() {
  for (;;) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !jobs_.empty(); };
      mu_.Await(absl::Condition(&ready));
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

void WorkerPool::ParallelFor(int64_t num_tasks, int max_parallelism,
                             absl::FunctionRef<void(int64_t)> fn) {
  if (num_tasks <= 0) return;
  const int64_t helpers =
      std::min<int64_t>({static_cast<int64_t>(num_threads()),
                         static_cast<int64_t>(max_parallelism) - 1, num_tasks - 1});
  if (helpers <= 0) {
    for (int64_t t = 0; t < num_tasks; ++t) fn(t);
    return;
  }
  auto state = std::make_shared<LoopState>();
  state->num_tasks = num_tasks;
  state->fn = &fn;
  {
    absl::MutexLock lock(&mu_);
    for (int64_t h = 0; h < helpers; ++h) jobs_.push_back([state] { state->RunTasks(); });
  }
  state->RunTasks();
  absl::MutexLock lock(&state->mu);
  auto all_done = [&state]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(state->mu) {
    return state->done == state->num_tasks;
  };
  state->mu.Await(absl::Condition(&all_done));
}

}  // namespace placement::server
