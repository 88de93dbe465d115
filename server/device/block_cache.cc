#include "server/device/block_cache.h"

namespace placement::server {

void* BlockCache::Take(int64_t size, MemoryOwnerTag owner) {
  absl::MutexLock lock(&mu_);
  const Key key{size, owner};
  auto last = blocks_.upper_bound(key);
  if (last == blocks_.begin()) return nullptr;
  --last;  // the most recently cached block of this key, if any
  if (last->first != key) return nullptr;
  void* block = last->second.block;
  blocks_.erase(last);
  bytes_ -= size;
  return block;
}

bool BlockCache::Put(int64_t size, void* block, MemoryOwnerTag owner, absl::Time now) {
  absl::MutexLock lock(&mu_);
  if (bytes_ + size > limit_) return false;
  const Key key{size, owner};
  blocks_.emplace_hint(blocks_.upper_bound(key), key, Entry{block, now});
  bytes_ += size;
  return true;
}

void BlockCache::Clear(absl::FunctionRef<void(void*)> release) {
  absl::MutexLock lock(&mu_);
  for (auto& [key, entry] : blocks_) release(entry.block);
  blocks_.clear();
  bytes_ = 0;
}

std::vector<std::pair<int64_t, void*>> BlockCache::TakeLargest(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, void*>> taken;
  int64_t removed = 0;
  while (!blocks_.empty() && removed < bytes) {
    auto it = std::prev(blocks_.end());
    const int64_t size = it->first.first;
    taken.emplace_back(size, it->second.block);
    removed += size;
    bytes_ -= size;
    blocks_.erase(it);
  }
  return taken;
}

std::vector<std::pair<int64_t, void*>> BlockCache::TakeCachedBefore(absl::Time cutoff) {
  absl::MutexLock lock(&mu_);
  std::vector<std::pair<int64_t, void*>> taken;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (it->second.cached < cutoff) {
      taken.emplace_back(it->first.first, it->second.block);
      bytes_ -= it->first.first;
      it = blocks_.erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

int64_t BlockCache::bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace placement::server
