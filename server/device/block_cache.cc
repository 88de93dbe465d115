#include "server/device/block_cache.h"

#include <algorithm>

namespace placement::server {

BlockCache::Map::iterator BlockCache::Erase(Map::iterator it) {
  const int64_t size = it->first.first;
  const MemoryOwnerTag owner = it->first.second;
  bytes_ -= size;
  auto held = owner_bytes_.find(owner);
  held->second -= size;
  if (held->second == 0) owner_bytes_.erase(held);
  return blocks_.erase(it);
}

void* BlockCache::Take(int64_t size, MemoryOwnerTag owner) {
  absl::MutexLock lock(&mu_);
  const Key key{size, owner};
  auto last = blocks_.upper_bound(key);
  if (last == blocks_.begin()) return nullptr;
  --last;  // the most recently cached block of this key, if any
  if (last->first != key) return nullptr;
  void* block = last->second.block;
  Erase(last);
  return block;
}

BlockCache::PutResult BlockCache::Put(int64_t size, void* block, MemoryOwnerTag owner,
                                      absl::Time now, int64_t room) {
  absl::MutexLock lock(&mu_);
  PutResult result;
  const int64_t bound = std::min(limit_, room);
  if (size > bound) return result;
  int64_t need = bytes_ + size - bound;
  if (need > 0) {
    // Plan the evictions first: nothing is taken unless the block is kept.
    // Each round takes the largest remaining block of the owner holding the
    // most, while that owner holds more than `owner` will.
    auto mine = owner_bytes_.find(owner);
    const int64_t will_hold = (mine == owner_bytes_.end() ? 0 : mine->second) + size;
    absl::flat_hash_map<MemoryOwnerTag, int64_t> held = owner_bytes_;
    // Per owner, where its next-largest block is looked for (from the end).
    absl::flat_hash_map<MemoryOwnerTag, Map::reverse_iterator> cursor;
    std::vector<Map::iterator> victims;
    while (need > 0) {
      MemoryOwnerTag richest = owner;
      int64_t most = will_hold;
      for (const auto& [other, bytes] : held) {
        if (other != owner && bytes > most) {
          richest = other;
          most = bytes;
        }
      }
      if (richest == owner) return result;  // no one holds more: not kept
      auto [at, fresh] = cursor.try_emplace(richest, blocks_.rbegin());
      while (at->second->first.second != richest) ++at->second;  // held[richest] > 0
      const int64_t victim_size = at->second->first.first;
      victims.push_back(std::prev(at->second.base()));
      ++at->second;
      held[richest] -= victim_size;
      need -= victim_size;
    }
    for (Map::iterator victim : victims) {
      result.evicted.emplace_back(victim->first.first, victim->second.block);
      Erase(victim);
    }
  }
  const Key key{size, owner};
  blocks_.emplace_hint(blocks_.upper_bound(key), key, Entry{block, now});
  bytes_ += size;
  owner_bytes_[owner] += size;
  result.kept = true;
  return result;
}

void BlockCache::Clear(absl::FunctionRef<void(void*)> release) {
  absl::MutexLock lock(&mu_);
  for (auto& [key, entry] : blocks_) release(entry.block);
  blocks_.clear();
  bytes_ = 0;
  owner_bytes_.clear();
}

BlockCache::Blocks BlockCache::TakeLargest(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  int64_t removed = 0;
  while (!blocks_.empty() && removed < bytes) {
    auto it = std::prev(blocks_.end());
    const int64_t size = it->first.first;
    taken.emplace_back(size, it->second.block);
    removed += size;
    Erase(it);
  }
  return taken;
}

BlockCache::Blocks BlockCache::TakeCachedBefore(absl::Time cutoff) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (it->second.cached < cutoff) {
      taken.emplace_back(it->first.first, it->second.block);
      it = Erase(it);
    } else {
      ++it;
    }
  }
  return taken;
}

BlockCache::Blocks BlockCache::TakeOwnedBy(MemoryOwnerTag owner) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    if (it->first.second == owner) {
      taken.emplace_back(it->first.first, it->second.block);
      it = Erase(it);
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

int64_t BlockCache::bytes_of(MemoryOwnerTag owner) const {
  absl::MutexLock lock(&mu_);
  auto it = owner_bytes_.find(owner);
  return it == owner_bytes_.end() ? 0 : it->second;
}

}  // namespace placement::server
