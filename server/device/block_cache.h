// BlockCache: freed device blocks kept for reuse by later allocations of the
// same (rounded) size, up to a byte limit -- the recycling that training
// loops and prefetch streams need, since they re-allocate the same shapes
// every step. BudgetedBackend keeps one per device (CpuBackend: avoids
// first-touch page faults; CudaBackend: avoids synchronising
// cudaFree/cudaMalloc) and counts it against the device's budget.
//
// Each block remembers when it was cached, so blocks nobody reused for a
// while can be given back (TakeCachedBefore: the backend's decay, like
// jemalloc's); Take reuses the most recently cached block of a size (the
// warmest) and decay takes the oldest.
//
// Thread-safe. The cache never frees blocks itself: Clear, TakeLargest and
// TakeCachedBefore hand them back to the caller.
#ifndef PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_
#define PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
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
  // Keeps `block` of `owner`, cached at `now`, when the cache has room for
  // `size` more bytes; returns false (the caller frees the block) otherwise.
  bool Put(int64_t size, void* block, MemoryOwnerTag owner, absl::Time now);
  // Hands every cached block to `release` and empties the cache.
  void Clear(absl::FunctionRef<void(void*)> release);
  // Removes blocks, largest first, until at least `bytes` are removed or the
  // cache is empty, and returns them as (size, block).
  std::vector<std::pair<int64_t, void*>> TakeLargest(int64_t bytes);
  // Removes every block cached before `cutoff` and returns them.
  std::vector<std::pair<int64_t, void*>> TakeCachedBefore(absl::Time cutoff);
  int64_t bytes() const;
  int64_t limit() const { return limit_; }

 private:
  struct Entry {
    void* block;
    absl::Time cached;
  };
  using Key = std::pair<int64_t, MemoryOwnerTag>;  // (size, owner)
  const int64_t limit_;
  mutable absl::Mutex mu_;
  // By size and owner; blocks of one key in the order they were cached.
  std::multimap<Key, Entry> blocks_ ABSL_GUARDED_BY(mu_);
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_BLOCK_CACHE_H_
