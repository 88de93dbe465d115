// BudgetedBackend: the allocator every DeviceBackend shares -- device-id
// lookup, per-device accounting against a budget, and a bounded cache of
// freed blocks -- so a platform only says how to get, free and copy raw
// blocks (CpuBackend: host pages, HostBlockPool; CudaBackend: cudaMalloc).
//
// Accounting, per device:
//   in use   the bytes of live DeviceBuffers, exactly as requested
//            (MemoryInUse; what ListDevices reports as memory_in_use_bytes);
//   charged  what those buffers cost: each one's block (BlockSize of the
//            request) plus the platform's per-buffer host overhead
//            (BufferOverheadBytes; memory_charged_bytes) -- a one-byte
//            tensor on the CPU platform costs a 4 KiB page and its record,
//            not one byte;
//   cached   freed blocks kept for reuse by allocations of the same block
//            size and memory owner (MemoryCached; memory_cached_bytes), at
//            their block size: a block is never reused for another owner's
//            buffer (DeviceBackend "Memory owners").
// Charged and cached count against the device's memory_limit_bytes: charged
// + cached never exceeds the budget (a freed block that does not fit, or
// does not fit the cache's own cap, is returned to the platform), and an
// allocation that does not fit beside the cache first releases cached
// blocks (of every device that shares the memory, see SharesMemoryWith), so
// the cache never makes an allocation fail. RESOURCE_EXHAUSTED only when
// charged + the new buffer's charge exceeds the budget, or when the platform
// itself is out of memory after the cache was emptied.
//
// A block a platform exported (DeviceBackend::ExportShard) is never cached:
// freed, it goes back to the platform (Reusable). Where the platform asks
// for it (RefillsWhenFreed: CPU memory files), a fresh block of the same size
// is then made on a background thread and cached in its place, when the
// budget and the cache have room for it then -- so a stream whose batches
// are exported (views) gets new pages without waiting for them, as it would
// get a cached block.
//
// Cached blocks remember when they were freed: ReleaseCachedBefore gives
// back those nobody reused since (the daemon's MemoryReclaimer calls it for
// idle blocks, under host memory pressure, and on an admin's TrimMemory);
// ReleaseCachedOf gives back one owner's (a tenant's TrimMemory).
//
// Thread-safe: each device's counters and cache are guarded by that device's
// own lock; allocations on different devices never contend.
#ifndef PLACEMENT_SERVER_DEVICE_BUDGETED_BACKEND_H_
#define PLACEMENT_SERVER_DEVICE_BUDGETED_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/device/device_backend.h"

namespace placement::server {

class BlockCache;

class BudgetedBackend : public DeviceBackend {
 public:
  ~BudgetedBackend() override;

  const std::vector<DeviceDescription>& Devices() const final { return devices_; }
  int64_t MemoryInUse(int64_t device_id) const final;
  int64_t MemoryCached(int64_t device_id) const final;
  int64_t MemoryCharged(int64_t device_id) const final;
  int64_t ChargeFor(int64_t bytes) const final;
  int64_t ReleaseCachedBefore(absl::Time cutoff) final;
  int64_t ReleaseCachedOf(MemoryOwnerTag owner) final;
  int64_t ReleasedBuffers() const final { return released_.load(std::memory_order_relaxed); }

  // NOT_FOUND for an unknown device, INVALID_ARGUMENT for a negative size,
  // RESOURCE_EXHAUSTED as the header says ("device 3: cannot allocate 1
  // bytes (charged 6144: a 4096-byte block and 2048 bytes of host overhead);
  // 8192 of 12288 bytes charged (1 in use)"). A zero-byte allocation succeeds, holds no
  // block and is charged the overhead.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t device_id, int64_t bytes) final;
  // Allocate, drawing only on cached blocks `owner`'s buffers held (see
  // DeviceBackend "Memory owners"); the block is cached for `owner` again
  // when the buffer is freed.
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> AllocateFor(int64_t device_id, int64_t bytes,
                                                            MemoryOwnerTag owner) final;

  // See DeviceBackend. FAILED_PRECONDITION while any device holds memory.
  absl::Status AssignGlobalIds(int64_t first_id, int32_t process_index) final;

  // Frees every cached block of every device. Platforms also call it in
  // their destructor, while their FreeBlock still works.
  void ReleaseCache() { ReleaseCachedBefore(absl::InfiniteFuture()); }

  // Refills queued since start (RefillsWhenFreed), for tests: decided in the
  // freeing call, so it is exact once that call returned.
  int64_t refills_scheduled() const { return refills_scheduled_.load(std::memory_order_relaxed); }

 protected:
  // `devices` ids must be consecutive (the first one's id + local index),
  // as DeviceDescription promises; `cache_bytes_per_device` caps each
  // device's cache (0 disables it) besides the budget.
  BudgetedBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device);

  // Index of a global id into Devices(), or -1.
  int LocalIndex(int64_t device_id) const;

  // The platform's raw memory. BlockSize rounds a request to the size of
  // the block that serves it (cached blocks are matched by this size).
  // AllocateBlock returns RESOURCE_EXHAUSTED when the platform is out of
  // memory (the base then empties the caches SharesMemoryWith names and
  // retries once), any other error as is.
  virtual int64_t BlockSize(int64_t bytes) const = 0;
  virtual absl::StatusOr<void*> AllocateBlock(int local_index, int64_t block_bytes) = 0;
  virtual void FreeBlock(int local_index, void* block, int64_t block_bytes) = 0;
  // Host memory one buffer costs beside its block (its records in the
  // daemon), charged against the device's budget where device memory is
  // host memory (CPU). Default 0: a GPU's budget is device memory; the host
  // side is bounded by the per-tenant tensor ceiling.
  virtual int64_t BufferOverheadBytes() const { return 0; }
  // Whether a freed block of `block_bytes` may be cached and handed to a
  // later allocation. A platform answers false for a block it exported
  // (ExportShard): another process may still map it, so it must never hold
  // other bytes; it is freed instead. Called under the device's lock.
  virtual bool Reusable(int /*local_index*/, void* /*block*/, int64_t /*block_bytes*/) const {
    return true;
  }
  // Whether a freed block Reusable refused should be replaced: a fresh block
  // of its size is made (AllocateBlock, on the backend's refill thread) and
  // cached, if charged + cached + it still fit the budget and the cache's
  // cap. Called under the device's lock, before FreeBlock. A platform that
  // answers true must call StopRefills() in its destructor, before
  // ReleaseCache().
  virtual bool RefillsWhenFreed(int /*local_index*/, void* /*block*/,
                                int64_t /*block_bytes*/) const {
    return false;
  }
  // Ends the refill thread (refills queued but not begun are dropped).
  // Idempotent.
  void StopRefills();

  // Whether devices `a` and `b` draw on the same physical memory (logical
  // devices of one GPU): their caches are released together when the
  // platform runs out. Default: only a device itself.
  virtual bool SharesMemoryWith(int a, int b) const { return a == b; }

 private:
  struct DeviceMemory;
  struct Refills;

  void Release(int64_t device_id, void* data, int64_t size, MemoryOwnerTag owner) final;
  // Queues a refill of device `index` for `owner` (at most a few wait; more
  // are dropped) and starts the refill thread with the first.
  void ScheduleRefill(int index, int64_t block_bytes, MemoryOwnerTag owner);
  void RunRefills();
  // Frees device `index`'s cached blocks until at least `bytes` are freed
  // (or all of them, when bytes < 0).
  void Evict(int index, int64_t bytes);
  // Frees, on every device, the cached blocks `take` removes from its cache;
  // returns their bytes.
  int64_t ReleaseCached(
      absl::FunctionRef<std::vector<std::pair<int64_t, void*>>(BlockCache&)> take);
  // What device `index`'s budget leaves for cached bytes now (its limit less
  // what its live buffers are charged). REQUIRES: its lock held.
  int64_t CacheRoom(int index) const;

  std::vector<DeviceDescription> devices_;
  std::vector<std::unique_ptr<DeviceMemory>> memory_;
  std::atomic<int64_t> released_{0};
  std::unique_ptr<Refills> refills_;
  std::atomic<int64_t> refills_scheduled_{0};
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_BUDGETED_BACKEND_H_
