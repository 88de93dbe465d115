// BlockCache: freed device blocks kept for reuse by later allocations of the
// same (rounded) size, up to a byte limit -- the recycling that training
// loops and prefetch streams need, since they re-allocate the same shapes
// every step. BudgetedBackend keeps one per device (CpuBackend: avoids
// first-touch page faults; CudaBackend: avoids synchronising
// cudaFree/cudaMalloc) and counts it against the device's budget.
//
// The cap is shared fairly between owners (max-min): a block that does not
// fit may push out blocks of an owner holding more cached bytes than its own
// owner would, never of one holding less -- so one tenant's churn cannot keep
// every other tenant's freed blocks out of the cache.
//
// Each block remembers when it was cached, so blocks nobody reused for a
// while can be given back (TakeCachedBefore: the backend's decay, like
// jemalloc's); Take reuses the most recently cached block of a size (the
// warmest) and decay takes the oldest.
//
// Thread-safe. The cache never frees blocks itself: Put, Clear, TakeLargest,
// TakeCachedBefore and TakeOwnedBy hand them back to the caller.
#ifndef PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_
#define PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_

#include <cstdint>
#include <limits>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/device/memory_owner.h"

namespace placement::server {

class BlockCache {
 public:
  explicit BlockCache(int64_t limit_bytes) : limit_(limit_bytes) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // A cached block of exactly `size` bytes last owned by `owner` (removed
  // from the cache), or nullptr when there is none.
  void* Take(int64_t size, MemoryOwnerTag owner);
  // A list of (size, block) the caller now owns and frees.
  using Blocks = std::vector<std::pair<int64_t, void*>>;
  struct PutResult {
    bool kept = false;  // false: the caller frees `block`
    Blocks evicted;     // other owners' blocks taken out to make room
  };
  // Keeps `block` of `owner`, cached at `now`, when the cache -- bounded by
  // its limit and by `room` (what the caller's budget leaves for cached
  // bytes) -- has room for `size` more bytes, or can make it fairly: it takes
  // blocks, largest first, from the owner holding the most cached bytes, as
  // long as that owner holds more than `owner` would once `block` is kept.
  // Nothing is taken when `block` cannot be kept.
  PutResult Put(int64_t size, void* block, MemoryOwnerTag owner, absl::Time now,
                int64_t room = std::numeric_limits<int64_t>::max());
  // Hands every cached block to `release` and empties the cache.
  void Clear(absl::FunctionRef<void(void*)> release);
  // Removes blocks, largest first, until at least `bytes` are removed or the
  // cache is empty, and returns them as (size, block).
  Blocks TakeLargest(int64_t bytes);
  // Removes every block cached before `cutoff` and returns them.
  Blocks TakeCachedBefore(absl::Time cutoff);
  // Removes every block of `owner` and returns them (a per-tenant purge).
  Blocks TakeOwnedBy(MemoryOwnerTag owner);
  int64_t bytes() const;
  // The cached bytes of `owner`.
  int64_t bytes_of(MemoryOwnerTag owner) const;
  int64_t limit() const { return limit_; }
  // Keys (size, owner) the cache holds a slot for, empty ones included:
  // at most kMaxSlots once blocks of more keys than that were taken.
  static constexpr size_t kMaxSlots = 256;
  size_t slots() const;

 private:
  struct Entry {
    void* block;
    absl::Time cached;
  };
  using Key = std::pair<int64_t, MemoryOwnerTag>;  // (size, owner)
  // By size and owner; a key's blocks in the order they were cached. A key
  // whose blocks were all taken keeps its empty slot (while there are at
  // most kMaxSlots, and until the next TakeCachedBefore), so a size in
  // steady reuse (a training step's shapes) costs no map node per Take and
  // Put.
  using Map = std::map<Key, std::vector<Entry>>;
  // Takes the last (most recently cached) block of `it`'s key out of the
  // counts and the cache; REQUIRES: the key has a block.
  void* PopLast(Map::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `size` bytes of `owner` from the counts.
  void Uncount(int64_t size, MemoryOwnerTag owner) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t limit_;
  mutable absl::Mutex mu_;
  Map blocks_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Cached bytes per owner (owners with none are absent).
  absl::flat_hash_map<MemoryOwnerTag, int64_t> owner_bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_
