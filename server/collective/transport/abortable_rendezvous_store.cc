#include "server/collective/transport/abortable_rendezvous_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::server {

bool RendezvousAbort::Abort(absl::Status why) {
  std::function<void(const absl::Status&)> hook;
  absl::Status said;
  {
    absl::MutexLock lock(&mu_);
    if (ended_) return false;
    if (why_.ok()) why_ = std::move(why);
    hook = std::move(hook_);
    hook_ = nullptr;
    said = why_;
  }
  // Outside the lock: the hook closes connections, and End may wait.
  if (hook) hook(said);
  return true;
}

absl::Status RendezvousAbort::End() {
  absl::MutexLock lock(&mu_);
  ended_ = true;
  hook_ = nullptr;
  return why_;
}

bool RendezvousAbort::OnAbort(std::function<void(const absl::Status&)> hook) {
  absl::MutexLock lock(&mu_);
  if (ended_ || !why_.ok()) return false;
  hook_ = std::move(hook);
  return true;
}

absl::Status RendezvousAbort::status() const {
  absl::MutexLock lock(&mu_);
  return why_;
}

absl::Status WatchedKeyStatus(RendezvousStore& store, const std::string& key) {
  absl::StatusOr<std::string> value = store.Get(key, absl::Milliseconds(1));
  return value.ok() ? absl::UnavailableError(*value) : absl::OkStatus();
}

absl::Status AbortableRendezvousStore::Set(const std::string& key, const std::string& value) {
  if (absl::Status aborted = abort_->status(); !aborted.ok()) return aborted;
  return store_->Set(key, value);
}

absl::StatusOr<std::string> AbortableRendezvousStore::Get(const std::string& key,
                                                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (absl::Status aborted = abort_->status(); !aborted.ok()) return aborted;
    const absl::Duration left = std::max(absl::ZeroDuration(), deadline - absl::Now());
    absl::StatusOr<std::string> value = store_->Get(key, std::min(poll_, left));
    // A slice's own DEADLINE_EXCEEDED is not the caller's until its
    // timeout has passed; every other outcome is.
    if (!absl::IsDeadlineExceeded(value.status())) return value;
    if (!watch_.empty()) {
      if (absl::Status given_up = WatchedKeyStatus(*store_, watch_); !given_up.ok()) {
        return given_up;
      }
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rendezvous: key '", key, "' not published within ", absl::FormatDuration(timeout)));
    }
  }
}

absl::StatusOr<int64_t> AbortableRendezvousStore::DeletePrefix(const std::string& prefix) {
  return store_->DeletePrefix(prefix);
}

}  // namespace placement::server
