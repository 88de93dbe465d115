// CpuBackend: N virtual devices in host memory, each with its own byte
// budget and exact accounting of what the daemon allocated on it (through
// BudgetedBackend). The "cpu" platform's backend (server/platform/cpu/) and
// the default when no GPU is present, and a first-class one: every RPC
// works on it.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_
#define PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_

#include <memory>
#include <vector>

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

 protected:
  // Whole pages from a HostBlockPool: freed pages leave the process.
  int64_t BlockSize(int64_t bytes) const override;
  absl::StatusOr<void*> AllocateBlock(int local_index, int64_t block_bytes) override;
  void FreeBlock(int local_index, void* block, int64_t block_bytes) override;
  int64_t BufferOverheadBytes() const override { return kCpuBufferOverheadBytes; }

 private:
  CpuBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device)
      : BudgetedBackend(std::move(devices), cache_bytes_per_device) {}

  HostBlockPool pool_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CPU_CPU_BACKEND_H_
