#include "client/src/region_pool.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "client/src/client_impl.h"
#include "grpcpp/grpcpp.h"

namespace placement::client {
namespace {

absl::Mutex registry_mu(absl::kConstInit);
// Keyed by the Client's channel (one per Client).
absl::flat_hash_map<const grpc::Channel*, std::shared_ptr<RegionPool>>& Pools()
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* pools = new absl::flat_hash_map<const grpc::Channel*, std::shared_ptr<RegionPool>>();
  return *pools;
}

constexpr int64_t kMiB = int64_t{1} << 20;

}  // namespace

std::shared_ptr<RegionPool> RegionPool::For(const Client& client) {
  absl::MutexLock lock(&registry_mu);
  std::shared_ptr<RegionPool>& pool = Pools()[client.impl().channel.get()];
  if (pool == nullptr) pool = std::make_shared<RegionPool>(client);
  return pool;
}

void RegionPool::Release(const grpc::Channel* channel) {
  std::shared_ptr<RegionPool> pool;
  {
    absl::MutexLock lock(&registry_mu);
    auto it = Pools().find(channel);
    if (it == Pools().end()) return;
    pool = std::move(it->second);
    Pools().erase(it);
  }
  // Unregisters the free regions here, while the Client is alive.
  absl::MutexLock lock(&pool->mu_);
  pool->free_.clear();
}

absl::StatusOr<std::string> RegionPool::SameHostSocket() {
  absl::MutexLock lock(&mu_);
  if (!socket_.has_value()) {
    absl::StatusOr<bool> same = RegionClient(client_).SameHost();
    if (!same.ok()) return same.status();
    std::string address;
    if (*same) {
      absl::StatusOr<DaemonStatus> status = client_.GetStatus();
      if (!status.ok()) return status.status();
      address = status->region_socket;
    }
    socket_ = std::move(address);
  }
  return *socket_;
}

absl::StatusOr<bool> RegionPool::UseRegion(TransferPath path, int64_t bytes) {
  if (path == TransferPath::kStream) return false;
  if (path == TransferPath::kAuto && bytes < kAutoMinBytes) return false;
  const bool forced = path == TransferPath::kRegion || path == TransferPath::kInPlace;
  absl::StatusOr<std::string> socket = SameHostSocket();
  if (!socket.ok()) {
    if (forced) return socket.status();
    return false;  // kAuto: the stream reports the real error, if any
  }
  const bool same_host = !socket->empty();
  if (forced && !same_host) {
    return absl::FailedPreconditionError(absl::StrCat(
        path == TransferPath::kRegion ? "TransferPath::kRegion" : "TransferPath::kInPlace",
        ": the daemon at ", client_.target(),
        " is not on this host (or has no region socket); use kAuto or kStream"));
  }
  return same_host;
}

absl::StatusOr<RegionPool::Lease> RegionPool::Borrow(int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->size() >= bytes && (best == free_.end() || (*it)->size() < (*best)->size())) {
        best = it;
      }
    }
    if (best != free_.end()) {
      std::unique_ptr<SharedRegion> region = std::move(*best);
      free_.erase(best);
      return Lease(this, std::move(region));
    }
  }
  const int64_t size = std::max<int64_t>(kMiB, (bytes + kMiB - 1) / kMiB * kMiB);
  absl::StatusOr<std::unique_ptr<SharedRegion>> region =
      SharedRegion::Create(client_, size, "placement-staging");
  if (!region.ok()) return region.status();
  return Lease(this, *std::move(region));
}

void RegionPool::Return(std::unique_ptr<SharedRegion> region) {
  // Unregistered and unmapped after the lock is released.
  std::vector<std::unique_ptr<SharedRegion>> dropped;
  absl::MutexLock lock(&mu_);
  free_.push_back(std::move(region));
  auto total = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t bytes = 0;
    for (const auto& r : free_) bytes += r->size();
    return bytes;
  };
  // Past either bound, drop the smallest (the largest serves any transfer).
  while (free_.size() > kMaxFreeRegions || (free_.size() > 1 && total() > kMaxFreeBytes)) {
    auto smallest = std::min_element(free_.begin(), free_.end(), [](const auto& a, const auto& b) {
      return a->size() < b->size();
    });
    dropped.push_back(std::move(*smallest));
    free_.erase(smallest);
  }
}

RegionPool::Lease::~Lease() {
  if (region_ != nullptr) pool_->Return(std::move(region_));
}

}  // namespace placement::client
