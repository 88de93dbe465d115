#include "server/common/expiry_thread.h"

#include <utility>

#include "absl/time/clock.h"

namespace placement::server {

ExpiryThread::ExpiryThread(std::function<absl::Time(absl::Time now)> sweep)
    : sweep_(std::move(sweep)) {
  thread_ = std::thread([this] { Run(); });
}

ExpiryThread::~ExpiryThread() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ExpiryThread::Wake() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
}

void ExpiryThread::Run() {
  while (true) {
    const absl::Time next = sweep_(absl::Now());
    absl::MutexLock lock(&mu_);
    auto go = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || woken_; };
    mu_.AwaitWithDeadline(absl::Condition(&go), next);
    if (stopping_) return;
    woken_ = false;
  }
}

}  // namespace placement::server
