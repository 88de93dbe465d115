#include "server/device/budgeted_backend.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "server/device/block_cache.h"

namespace placement::server {
namespace {

// Refills waiting at most; a stream frees one batch's blocks at a time.
constexpr size_t kMaxPendingRefills = 8;

}  // namespace

struct BudgetedBackend::Refills {
  absl::Mutex mu;
  struct Job {
    int index;  // the device's
    int64_t bytes;
    MemoryOwnerTag owner;
  };
  std::deque<Job> queue ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;
  std::thread thread;  // started by the first refill, under mu
};

// One device's counters and cache. Every change to `charged` and to `cache`
// happens under `mu`, so charged + cached is checked against the budget
// atomically; the getters read snapshots without it.
struct BudgetedBackend::DeviceMemory {
  explicit DeviceMemory(int64_t cache_limit) : cache(cache_limit) {}
  absl::Mutex mu;
  std::atomic<int64_t> in_use{0};
  std::atomic<int64_t> charged{0};
  BlockCache cache;
};

BudgetedBackend::BudgetedBackend(std::vector<DeviceDescription> devices,
                                 int64_t cache_bytes_per_device)
    : devices_(std::move(devices)), refills_(std::make_unique<Refills>()) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    memory_.push_back(std::make_unique<DeviceMemory>(cache_bytes_per_device));
  }
}

// The platform's destructor has already called StopRefills and ReleaseCache
// (its FreeBlock is gone by now); buffers must not outlive the backend.
BudgetedBackend::~BudgetedBackend() { StopRefills(); }

void BudgetedBackend::StopRefills() {
  std::thread thread;
  {
    absl::MutexLock lock(&refills_->mu);
    refills_->stop = true;
    refills_->queue.clear();
    thread = std::move(refills_->thread);
  }
  if (thread.joinable()) thread.join();
}

void BudgetedBackend::ScheduleRefill(int index, int64_t block_bytes, MemoryOwnerTag owner) {
  absl::MutexLock lock(&refills_->mu);
  if (refills_->stop || refills_->queue.size() >= kMaxPendingRefills) return;
  refills_->queue.push_back({index, block_bytes, owner});
  refills_scheduled_.fetch_add(1, std::memory_order_relaxed);
  if (!refills_->thread.joinable()) refills_->thread = std::thread([this] { RunRefills(); });
}

void BudgetedBackend::RunRefills() {
  Refills& r = *refills_;
  while (true) {
    Refills::Job job;
    {
      absl::MutexLock lock(&r.mu);
      r.mu.Await(absl::Condition(
          +[](Refills* r)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(r->mu) { return r->stop || !r->queue.empty(); },
          &r));
      if (r.stop) return;
      job = r.queue.front();
      r.queue.pop_front();
    }
    const auto [index, block_bytes, owner] = job;
    absl::StatusOr<void*> block = AllocateBlock(index, block_bytes);
    if (!block.ok()) continue;  // the platform is short of memory: no refill
    DeviceMemory& m = *memory_[index];
    BlockCache::PutResult put;
    {
      absl::MutexLock lock(&m.mu);
      put = m.cache.Put(block_bytes, *block, owner, absl::Now(), CacheRoom(index));
    }
    for (const auto& [size, evicted] : put.evicted) FreeBlock(index, evicted, size);
    if (!put.kept) FreeBlock(index, *block, block_bytes);
  }
}

int64_t BudgetedBackend::CacheRoom(int index) const {
  return devices_[index].memory_limit_bytes -
         memory_[index]->charged.load(std::memory_order_relaxed);
}

int BudgetedBackend::LocalIndex(int64_t device_id) const {
  if (devices_.empty()) return -1;
  const int64_t local = device_id - devices_.front().id;
  if (local < 0 || local >= static_cast<int64_t>(devices_.size())) return -1;
  return static_cast<int>(local);
}

absl::Status BudgetedBackend::AssignGlobalIds(int64_t first_id, int32_t process_index) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    if (memory_[i]->charged.load() != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("device ", devices_[i].id, " holds memory; ids are assigned before use"));
    }
  }
  for (size_t i = 0; i < devices_.size(); ++i) {
    devices_[i].id = first_id + static_cast<int64_t>(i);
    devices_[i].process_index = process_index;
  }
  return absl::OkStatus();
}

int64_t BudgetedBackend::MemoryInUse(int64_t device_id) const {
  const int idx = LocalIndex(device_id);
  return idx < 0 ? 0 : memory_[idx]->in_use.load(std::memory_order_relaxed);
}

int64_t BudgetedBackend::MemoryCached(int64_t device_id) const {
  const int idx = LocalIndex(device_id);
  return idx < 0 ? 0 : memory_[idx]->cache.bytes();
}

int64_t BudgetedBackend::MemoryCharged(int64_t device_id) const {
  const int idx = LocalIndex(device_id);
  return idx < 0 ? 0 : memory_[idx]->charged.load(std::memory_order_relaxed);
}

int64_t BudgetedBackend::ChargeFor(int64_t bytes) const {
  return (bytes > 0 ? BlockSize(bytes) : 0) + BufferOverheadBytes();
}

void BudgetedBackend::Evict(int index, int64_t bytes) {
  DeviceMemory& m = *memory_[index];
  std::vector<std::pair<int64_t, void*>> freed;
  {
    absl::MutexLock lock(&m.mu);
    freed = m.cache.TakeLargest(bytes < 0 ? std::numeric_limits<int64_t>::max() : bytes);
  }
  for (const auto& [size, block] : freed) FreeBlock(index, block, size);
}

int64_t BudgetedBackend::ReleaseCachedBefore(absl::Time cutoff) {
  return ReleaseCached([cutoff](BlockCache& cache) { return cache.TakeCachedBefore(cutoff); });
}

int64_t BudgetedBackend::ReleaseCachedOf(MemoryOwnerTag owner) {
  return ReleaseCached([owner](BlockCache& cache) { return cache.TakeOwnedBy(owner); });
}

int64_t BudgetedBackend::ReleaseCached(absl::FunctionRef<BlockCache::Blocks(BlockCache&)> take) {
  int64_t released = 0;
  for (size_t i = 0; i < memory_.size(); ++i) {
    DeviceMemory& m = *memory_[i];
    BlockCache::Blocks freed;
    {
      absl::MutexLock lock(&m.mu);
      freed = take(m.cache);
    }
    for (const auto& [size, block] : freed) {
      FreeBlock(static_cast<int>(i), block, size);
      released += size;
    }
  }
  return released;
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> BudgetedBackend::Allocate(int64_t device_id,
                                                                        int64_t bytes) {
  return AllocateFor(device_id, bytes, kDaemonMemory);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> BudgetedBackend::AllocateFor(int64_t device_id,
                                                                           int64_t bytes,
                                                                           MemoryOwnerTag owner) {
  const int idx = LocalIndex(device_id);
  if (idx < 0) {
    return absl::NotFoundError(absl::StrCat("device ", device_id,
                                            " does not exist; this daemon has ", devices_.size(),
                                            " ", Name(), " devices"));
  }
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("allocation size must be >= 0, got ", bytes));
  }
  DeviceMemory& m = *memory_[idx];
  const int64_t limit = devices_[idx].memory_limit_bytes;
  const int64_t block_bytes = bytes > 0 ? BlockSize(bytes) : 0;
  const int64_t charge = block_bytes + BufferOverheadBytes();
  void* data = nullptr;
  std::vector<std::pair<int64_t, void*>> evicted;  // cached blocks making room
  {
    // Reserve first, under the device's lock, so concurrent allocations
    // cannot both pass the check.
    absl::MutexLock lock(&m.mu);
    const int64_t before = m.charged.load(std::memory_order_relaxed);
    if (before + charge > limit) {
      const std::string cost =
          charge == bytes
              ? std::string()
              : absl::StrCat(" (charged ", charge, ": a ", block_bytes, "-byte block and ",
                             BufferOverheadBytes(), " bytes of host overhead)");
      return absl::ResourceExhaustedError(absl::StrCat(
          "device ", device_id, ": cannot allocate ", bytes, " bytes", cost, "; ", before, " of ",
          limit, " bytes charged (", m.in_use.load(std::memory_order_relaxed), " in use)"));
    }
    m.charged.fetch_add(charge, std::memory_order_relaxed);
    m.in_use.fetch_add(bytes, std::memory_order_relaxed);
    if (bytes > 0) {
      data = m.cache.Take(block_bytes, owner);
      if (data == nullptr) {
        // The cache counts against the budget: make room in it first.
        const int64_t over = before + charge + m.cache.bytes() - limit;
        if (over > 0) evicted = m.cache.TakeLargest(over);
      }
    }
  }
  for (const auto& [size, block] : evicted) FreeBlock(idx, block, size);
  if (bytes == 0 || data != nullptr) {
    return std::make_unique<DeviceBuffer>(this, device_id, data, bytes, owner);
  }
  absl::StatusOr<void*> block = AllocateBlock(idx, block_bytes);
  if (absl::IsResourceExhausted(block.status())) {
    // Cached blocks of other sizes (of any device on the same memory) may be
    // what stands in the way.
    for (size_t j = 0; j < memory_.size(); ++j) {
      if (SharesMemoryWith(idx, static_cast<int>(j))) Evict(static_cast<int>(j), -1);
    }
    block = AllocateBlock(idx, block_bytes);
  }
  if (!block.ok()) {
    absl::MutexLock lock(&m.mu);
    m.charged.fetch_sub(charge, std::memory_order_relaxed);
    m.in_use.fetch_sub(bytes, std::memory_order_relaxed);
    return block.status();
  }
  return std::make_unique<DeviceBuffer>(this, device_id, *block, bytes, owner);
}

void BudgetedBackend::Release(int64_t device_id, void* data, int64_t size, MemoryOwnerTag owner) {
  const int idx = LocalIndex(device_id);
  if (idx < 0) return;  // DeviceBuffers of this backend only come from Allocate
  released_.fetch_add(1, std::memory_order_relaxed);
  DeviceMemory& m = *memory_[idx];
  const int64_t block_bytes = data != nullptr ? BlockSize(size) : 0;
  const int64_t charge = block_bytes + BufferOverheadBytes();
  bool refill = false;
  BlockCache::PutResult put;
  {
    absl::MutexLock lock(&m.mu);
    m.in_use.fetch_sub(size, std::memory_order_relaxed);
    m.charged.fetch_sub(charge, std::memory_order_relaxed);
    if (data == nullptr) return;
    // Cache the block only while charged + cached stays within the budget
    // (CacheRoom) and the cache's own cap, which BlockCache::Put shares
    // fairly between owners. An exported block is never reused (a reader may
    // still map it); a fresh one may replace it.
    if (Reusable(idx, data, block_bytes)) {
      put = m.cache.Put(block_bytes, data, owner, absl::Now(), CacheRoom(idx));
    } else {
      refill = m.cache.bytes() + block_bytes <= std::min(CacheRoom(idx), m.cache.limit()) &&
               RefillsWhenFreed(idx, data, block_bytes);
    }
  }
  for (const auto& [evicted_size, evicted] : put.evicted) FreeBlock(idx, evicted, evicted_size);
  if (put.kept) return;
  FreeBlock(idx, data, block_bytes);
  if (refill) ScheduleRefill(idx, block_bytes, owner);
}

}  // namespace placement::server
