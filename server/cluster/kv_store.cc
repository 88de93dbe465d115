#include "server/cluster/kv_store.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace placement::server {

absl::Status KvStore::Set(const std::string& key, std::string value) {
  if (key.empty() || key.size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("key is ", key.size(), " bytes; keys are 1..", kMaxKeyBytes, " bytes"));
  }
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat("value of key '", key, "' is ", value.size(),
                                                   " bytes; at most ", kMaxValueBytes));
  }
  absl::MutexLock lock(&mu_);
  if (values_.size() >= kMaxKeys && !values_.contains(key)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the key-value store holds ", values_.size(), " keys, its limit"));
  }
  values_[key] = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<std::string> KvStore::Get(const std::string& key, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto present = [this, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopping_ || values_.contains(key);
  };
  const bool ready = mu_.AwaitWithTimeout(absl::Condition(&present), timeout);
  if (stopping_) return absl::UnavailableError("the coordinator is stopping");
  if (!ready) {
    return absl::DeadlineExceededError(
        absl::StrCat("key '", key, "' was not set within ", absl::FormatDuration(timeout)));
  }
  return values_.at(key);
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
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

int64_t KvStore::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(values_.size());
}

}  // namespace placement::server
