#include "server/cluster/kv_store.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace placement::server {

KvStore::~KvStore() { Shutdown(); }

absl::Status KvStore::Set(const std::string& key, std::string value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is ", key.size(), " bytes; keys are 1..", kMaxKeyBytes, " bytes"));
  }
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("value of key '", key, "' is ", value.size(),
                                                   " bytes; at most ", kMaxValueBytes));
  }
  Completions<std::string> done;
  absl::MutexLock lock(&mu_);
  if (values_.size() >= kMaxKeys && !values_.contains(key)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the key-value store holds ", values_.size(), " keys, its limit"));
  }
  auto [first, last] = waiting_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    timer_->Cancel(it->second->timer);
    done.Add(it->second->Take(), value);
  }
  waiting_.erase(first, last);
  values_[key] = std::move(value);
  return absl::OkStatus();
}

void KvStore::Get(const std::string& key, absl::Duration timeout, GetDone get_done) {
  Completions<std::string> done;
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    done.Add(std::move(get_done), absl::UnavailableError("the coordinator is stopping"));
    return;
  }
  if (auto it = values_.find(key); it != values_.end()) {
    done.Add(std::move(get_done), it->second);
    return;
  }
  auto wait = std::make_shared<Wait>(std::move(get_done));
  waiting_.emplace(key, wait);
  wait->timer = timer_->Schedule(absl::Now() + timeout,
                                 [this, key, wait, timeout] { TimedOut(key, wait, timeout); });
}

void KvStore::TimedOut(const std::string& key, const std::shared_ptr<Wait>& wait,
                       absl::Duration timeout) {
  Completions<std::string> done;
  absl::MutexLock lock(&mu_);
  auto [first, last] = waiting_.equal_range(key);
  for (auto it = first; it != last; ++it) {
    if (it->second != wait) continue;
    waiting_.erase(it);
    done.Add(wait->Take(),
             absl::DeadlineExceededError(absl::StrCat("key '", key, "' was not set within ",
                                                      absl::FormatDuration(timeout))));
    return;
  }
}

absl::StatusOr<std::string> KvStore::GetBlocking(const std::string& key, absl::Duration timeout) {
  absl::Notification ready;
  absl::StatusOr<std::string> result;
  Get(key, timeout, [&](absl::StatusOr<std::string> got) {
    result = std::move(got);
    ready.Notify();
  });
  ready.WaitForNotification();
  return result;
}

int64_t KvStore::DeletePrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && absl::StartsWith(it->first, prefix);) {
    it = values_.erase(it);
    ++n;
  }
  return n;
}

void KvStore::Shutdown() {
  Completions<std::string> done;
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [key, wait] : waiting_) {
    timer_->Cancel(wait->timer);
    done.Add(wait->Take(), absl::UnavailableError("the coordinator is stopping"));
  }
  waiting_.clear();
}

int64_t KvStore::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(values_.size());
}

int64_t KvStore::waiting() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(waiting_.size());
}

}  // namespace placement::server
