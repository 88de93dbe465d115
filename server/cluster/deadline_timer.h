// DeadlineTimer: runs callbacks at given times on one thread of its own, so
// that the coordinator can bound any number of asynchronous waits (joins,
// barrier arrivals, key-value gets) without a thread per wait.
//
// A callback runs at most once, on the timer's thread, at or after its
// time; Cancel before it runs stops it. Callbacks must be short (they
// complete a wait) and must not call back into this timer's Cancel for
// their own id (they may Schedule and Cancel others). Callbacks still
// pending when the timer is destroyed never run.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_DEADLINE_TIMER_H_
#define PLACEMENT_SERVER_CLUSTER_DEADLINE_TIMER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

class DeadlineTimer {
 public:
  using Id = uint64_t;

  DeadlineTimer();
  ~DeadlineTimer();
  DeadlineTimer(const DeadlineTimer&) = delete;
  DeadlineTimer& operator=(const DeadlineTimer&) = delete;

  // Runs `fn` at `when` (at once, on the timer's thread, when `when` has
  // passed). Returns an id for Cancel.
  Id Schedule(absl::Time when, std::function<void()> fn);
  // Stops `id` from running; false when it already ran, runs now, or is
  // unknown.
  bool Cancel(Id id);

  // Callbacks waiting to run (tests, metrics).
  size_t pending() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  // (time, id) -> callback: earliest first, ties in scheduling order.
  std::map<std::pair<absl::Time, Id>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  std::map<Id, absl::Time> when_ ABSL_GUARDED_BY(mu_);
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_DEADLINE_TIMER_H_
