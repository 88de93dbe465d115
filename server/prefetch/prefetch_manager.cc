#include "server/prefetch/prefetch_manager.h"

#include <utility>

namespace placement::server {
namespace {

absl::Status ShuttingDown() {
  return absl::UnavailableError(
      "placementd is shutting down; the prefetch stream was closed and its batches freed");
}

}  // namespace

PrefetchManager::PrefetchManager(const TensorOps* ops, Metrics* metrics)
    : ops_(ops), metrics_(metrics) {}

PrefetchManager::~PrefetchManager() = default;

absl::StatusOr<int64_t> PrefetchManager::Register(AbortFn abort, std::string tenant) {
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return ShuttingDown();
  const int64_t id = next_id_++;
  streams_.emplace(id, Stream{std::move(abort), std::move(tenant)});
  return id;
}

void PrefetchManager::Unregister(int64_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

std::unique_ptr<PrefetchPipeline> PrefetchManager::NewPipeline(PrefetchConfig config) {
  return std::make_unique<PrefetchPipeline>(ops_, std::move(config), &metrics_);
}

void PrefetchManager::StartShutdown() {
  absl::MutexLock lock(&mu_);
  shutting_down_ = true;
  const absl::Status status = ShuttingDown();
  for (auto& [id, stream] : streams_) stream.abort(status);
  streams_.clear();
}

int64_t PrefetchManager::open_streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(streams_.size());
}

int64_t PrefetchManager::open_streams(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, stream] : streams_) n += stream.tenant == tenant ? 1 : 0;
  return n;
}

}  // namespace placement::server
