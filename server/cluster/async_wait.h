// AsyncWait<T>: one asynchronous wait of the coordinator (a join, a barrier
// arrival, a key-value get) that ends exactly once -- completed, timed out
// or failed at shutdown, whichever comes first -- by calling its callback.
//
// The owner keeps its waits under its own mutex and ends one by Take()-ing
// the callback there (null when it already ended), then runs the callback
// after unlocking, so callbacks never run under the owner's lock. The
// timeout is a DeadlineTimer callback that does the same; `timer` lets the
// owner cancel it when the wait ends otherwise.
//
// Not thread-safe by itself: guarded by its owner's mutex.
#ifndef PLACEMENT_SERVER_CLUSTER_ASYNC_WAIT_H_
#define PLACEMENT_SERVER_CLUSTER_ASYNC_WAIT_H_

#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cluster/deadline_timer.h"

namespace placement::server {

template <typename T>
class AsyncWait {
 public:
  using Done = std::function<void(absl::StatusOr<T>)>;

  explicit AsyncWait(Done done) : done_(std::move(done)) {}

  // The callback, once; null after the first Take.
  Done Take() { return std::exchange(done_, nullptr); }
  bool ended() const { return done_ == nullptr; }

  DeadlineTimer::Id timer = 0;

 private:
  Done done_;
};

// Callbacks collected under a lock and run after it is released: declare
// the Completions before the lock (`Completions<T> done; absl::MutexLock
// lock(&mu_);`) so that its destructor, which runs them, comes after the
// unlock.
template <typename T>
class Completions {
 public:
  Completions() = default;
  Completions(const Completions&) = delete;
  Completions& operator=(const Completions&) = delete;
  ~Completions() { Run(); }

  void Add(typename AsyncWait<T>::Done done, absl::StatusOr<T> result) {
    if (done) pending_.emplace_back(std::move(done), std::move(result));
  }
  // Runs every collected callback. REQUIRES: no lock of the owner held.
  void Run() {
    for (auto& [done, result] : pending_) done(std::move(result));
    pending_.clear();
  }

 private:
  std::vector<std::pair<typename AsyncWait<T>::Done, absl::StatusOr<T>>> pending_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_ASYNC_WAIT_H_
