#include "server/device/block_cache.h"

#include <algorithm>

namespace placement::server {

void BlockCache::Uncount(int64_t size, MemoryOwnerTag owner) {
  bytes_ -= size;
  auto held = owner_bytes_.find(owner);
  held->second -= size;
  if (held->second == 0) owner_bytes_.erase(held);
}

void* BlockCache::PopLast(Map::iterator it) {
  void* block = it->second.back().block;
  it->second.pop_back();
  Uncount(it->first.first, it->first.second);
  return block;
}

void* BlockCache::Take(int64_t size, MemoryOwnerTag owner) {
  absl::MutexLock lock(&mu_);
  auto it = blocks_.find(Key{size, owner});
  if (it == blocks_.end() || it->second.empty()) return nullptr;
  void* block = PopLast(it);  // the most recently cached block of this key
  if (it->second.empty() && blocks_.size() > kMaxSlots) blocks_.erase(it);
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
    // Per owner, the key its next-largest block is looked for in (from the
    // end) and how many of that key's blocks (from the back) are planned.
    struct Cursor {
      Map::reverse_iterator key;
      size_t planned = 0;
    };
    absl::flat_hash_map<MemoryOwnerTag, Cursor> cursor;
    // One entry per block to take: the key whose last block it is then.
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
      Cursor& at = cursor.try_emplace(richest, Cursor{blocks_.rbegin()}).first->second;
      // held[richest] > 0: a block of `richest` not yet planned exists.
      while (at.key->first.second != richest || at.planned == at.key->second.size()) {
        ++at.key;
        at.planned = 0;
      }
      const int64_t victim_size = at.key->first.first;
      victims.push_back(std::prev(at.key.base()));
      ++at.planned;
      held[richest] -= victim_size;
      need -= victim_size;
    }
    for (Map::iterator victim : victims) {
      const int64_t victim_size = victim->first.first;
      result.evicted.emplace_back(victim_size, PopLast(victim));
    }
  }
  blocks_[Key{size, owner}].push_back(Entry{block, now});
  bytes_ += size;
  owner_bytes_[owner] += size;
  result.kept = true;
  return result;
}

void BlockCache::Clear(absl::FunctionRef<void(void*)> release) {
  absl::MutexLock lock(&mu_);
  for (auto& [key, entries] : blocks_) {
    for (const Entry& entry : entries) release(entry.block);
  }
  blocks_.clear();
  bytes_ = 0;
  owner_bytes_.clear();
}

BlockCache::Blocks BlockCache::TakeLargest(int64_t bytes) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  int64_t removed = 0;
  for (auto it = blocks_.rbegin(); it != blocks_.rend() && removed < bytes; ++it) {
    const int64_t size = it->first.first;
    while (!it->second.empty() && removed < bytes) {
      taken.emplace_back(size, PopLast(std::prev(it.base())));
      removed += size;
    }
  }
  return taken;
}

BlockCache::Blocks BlockCache::TakeCachedBefore(absl::Time cutoff) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const auto [size, owner] = it->first;
    std::vector<Entry>& entries = it->second;
    auto kept = std::remove_if(entries.begin(), entries.end(), [&](const Entry& entry) {
      if (entry.cached >= cutoff) return false;
      taken.emplace_back(size, entry.block);
      Uncount(size, owner);
      return true;
    });
    entries.erase(kept, entries.end());
    // Keys left empty go here, so sizes no longer in use hold no slot.
    it = entries.empty() ? blocks_.erase(it) : std::next(it);
  }
  return taken;
}

BlockCache::Blocks BlockCache::TakeOwnedBy(MemoryOwnerTag owner) {
  absl::MutexLock lock(&mu_);
  Blocks taken;
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const auto [size, key_owner] = it->first;
    if (key_owner != owner) {
      ++it;
      continue;
    }
    for (const Entry& entry : it->second) {
      taken.emplace_back(size, entry.block);
      Uncount(size, owner);
    }
    it = blocks_.erase(it);
  }
  return taken;
}

size_t BlockCache::slots() const {
  absl::MutexLock lock(&mu_);
  return blocks_.size();
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
