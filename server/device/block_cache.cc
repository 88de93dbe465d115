#include "server/device/block_cache.h"

namespace placement::server {

void* BlockCache::Take(int64_t size) {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(size);
  if (it == blocks_.end()) return nullptr;
  void* block = it->second;
  blocks_.erase(it);
  bytes_ -= size;
  return block;
}

bool BlockCache::Put(int64_t size, void* block) {
  absl::MutexLock lock(&mu_);
  if (bytes_ + size > limit_) return false;
  blocks_.emplace(size, block);
  bytes_ += size;
  return true;
}

void BlockCache::Clear(absl::FunctionRef<void(void*)> release) {
  absl::MutexLock lock(&mu_);
  for (auto& [size, block] : blocks_) release(block);
  blocks_.clear();
  bytes_ = 0;
}

std::vector<std::pair<int64_t, void*>> BlockCache::TakeLargest(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, void*>> taken;
  int64_t removed = 0;
  while (!blocks_.empty() && removed < bytes) {
    auto it = std::prev(blocks_.end());
    taken.emplace_back(it->first, it->second);
    removed += it->first;
    bytes_ -= it->first;
    blocks_.erase(it);
  }
  return taken;
}

int64_t BlockCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace placement::server
