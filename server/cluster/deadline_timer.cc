#include "server/cluster/deadline_timer.h"

#include "absl/time/clock.h"

namespace placement::server {

DeadlineTimer::DeadlineTimer() : thread_([this] { Loop(); }) {}

DeadlineTimer::~DeadlineTimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

DeadlineTimer::Id DeadlineTimer::Schedule(absl::Time when, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  const Id id = next_id_++;
  queue_.emplace(std::make_pair(when, id), std::move(fn));
  when_.emplace(id, when);
  return id;
}

bool DeadlineTimer::Cancel(Id id) {
  absl::MutexLock lock(&mu_);
  auto it = when_.find(id);
  if (it == when_.end()) return false;
  queue_.erase(std::make_pair(it->second, id));
  when_.erase(it);
  return true;
}

size_t DeadlineTimer::pending() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void DeadlineTimer::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      mu_.Await(absl::Condition(
          +[](DeadlineTimer* t)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(t->mu_) { return t->stopping_ || !t->queue_.empty(); },
          this));
      continue;
    }
    const absl::Time first = queue_.begin()->first.first;
    const absl::Time now = absl::Now();
    if (first > now) {
      // Wakes early when an earlier callback is scheduled or on stop.
      const size_t size = queue_.size();
      const Id head = queue_.begin()->first.second;
      auto changed = [this, size, head]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || queue_.size() != size ||
               (!queue_.empty() && queue_.begin()->first.second != head);
      };
      mu_.AwaitWithDeadline(absl::Condition(&changed), first);
      continue;
    }
    auto it = queue_.begin();
    std::function<void()> fn = std::move(it->second);
    when_.erase(it->first.second);
    queue_.erase(it);
    mu_.Unlock();
    fn();
    mu_.Lock();
  }
}

}  // namespace placement::server
