// CpuBackend: N virtual devices in host memory, each with its own byte
// budget and exact accounting of what the daemon allocated on it (through
// BudgetedBackend). The "cpu" platform's backend (server/platform/cpu/) and
// the default when no GPU is present, and a first-class one: every RPC
// works on it.
//
// Export (DeviceBackend::ExportShard, docs/api/views.md): a buffer of 256
// KiB or more lives in a memory file of its own (HostBlockPool), so its
// export is that file re-opened O_RDONLY, after sealing it against writes
// (F_SEAL_FUTURE_WRITE: the daemon's own mapping stays writable, no new
// writable mapping, write() or hole punch by anyone) -- zero copies, flat in
// size. A smaller buffer shares its slab with others' and is exported as a
// private copy in a memory file of its own, charged against the device's
// budget while exported. An exported block is never reused (Reusable): freed,
// a fresh memory file of its size replaces it in the cache (RefillsWhenFreed),
// made in the background.
//
// Writing in place (ExportWritable): a buffer of 256 KiB or more of a tenant
// (DeviceBuffer::owner) is handed out as a read-write re-open of its memory
// file; the block cache reuses it only for that tenant (BudgetedBackend).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_
#define PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "server/device/budgeted_backend.h"
#include "server/device/host_block_pool.h"

namespace placement::server {

struct CpuBackendOptions {
  int num_devices = 8;
  // Budget per virtual device in bytes; 0 = half the machine's physical
  // memory divided evenly among the devices.
  int64_t device_memory_bytes = 0;
  // Node identity, given by the daemon: ids are
  // process_index * kMaxLocalDevices + local index.
  int32_t process_index = 0;
  // Freed blocks kept per device for reuse by allocations of the same
  // page-rounded size (training loops and prefetch re-allocate the same
  // shapes; fresh pages cost a page fault per 4 KiB). Cached bytes count
  // against the device's budget but not as in use (BudgetedBackend).
  // 0 disables the cache.
  int64_t cache_bytes_per_device = int64_t{256} << 20;
  // Blocks of 256 KiB and more that are memory files (exportable in place,
  // ExportShard) at once, over all devices; each holds a descriptor. -1 =
  // half the process's open-file limit, after raising its soft limit to the
  // hard one (as the Go and Java runtimes do). Past it, blocks are anonymous
  // memory and their exports are private copies.
  int64_t max_file_blocks = -1;
};

// Host memory one buffer costs the daemon beside its block -- the tensor's
// and shard's records, the id maps' entries, the allocator's own -- charged
// against the device's budget with the block, so that the daemon's resident
// memory stays within the budgets however small the tensors
// (docs/operations.md). Measured (RSS after a trim, 4000 tensors): 1.6 KB
// for a one-shard tensor, 0.26 KB for each further shard; 2 KiB per buffer
// covers both.
inline constexpr int64_t kCpuBufferOverheadBytes = 2048;

class CpuBackend final : public BudgetedBackend {
 public:
  // INVALID_ARGUMENT for num_devices outside [1, 1024] or a negative budget.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);
  ~CpuBackend() override;

  absl::string_view Name() const override { return "cpu"; }
  bool HostAddressable() const override { return true; }
  absl::Status Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) override;
  absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) override;
  absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                    absl::Span<const ByteRun> runs) override;
  absl::StatusOr<std::unique_ptr<ShardExport>> ExportShard(const DeviceBuffer& buffer) override;
  // A read-write re-open of the buffer's memory file (sealed against
  // shrinking and growing when it was made, so a writer cannot take pages
  // from under the daemon's mapping).
  absl::StatusOr<std::unique_ptr<ShardExport>> ExportWritable(const DeviceBuffer& buffer,
                                                              MemoryOwnerTag owner) override;

  // Live blocks that have been exported (never reused), for tests.
  int64_t exported_blocks() const;

 protected:
  // Whole pages from a HostBlockPool: freed pages leave the process.
  int64_t BlockSize(int64_t bytes) const override;
  absl::StatusOr<void*> AllocateBlock(int local_index, int64_t block_bytes) override;
  void FreeBlock(int local_index, void* block, int64_t block_bytes) override;
  int64_t BufferOverheadBytes() const override { return kCpuBufferOverheadBytes; }
  // Not an exported block, nor a large anonymous one (made past the memory
  // file bound): the cache holds only blocks an export can use in place.
  bool Reusable(int local_index, void* block, int64_t block_bytes) const override;
  // An exported memory-file block, while more than one memory-file slot is
  // free besides it: a fresh one replaces it in the cache.
  bool RefillsWhenFreed(int local_index, void* block, int64_t block_bytes) const override;

 private:
  CpuBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device,
             int64_t max_file_blocks)
      : BudgetedBackend(std::move(devices), cache_bytes_per_device), pool_(max_file_blocks) {}
  // Seals the memory file `fd` of a block against writes and marks the block
  // exported; returns a new O_RDONLY fd of it.
  absl::StatusOr<int> ExportFile(void* block, int fd);

  HostBlockPool pool_;
  mutable absl::Mutex exported_mu_;
  absl::flat_hash_set<void*> exported_ ABSL_GUARDED_BY(exported_mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_
