// CpuBackend: N virtual devices in host memory, each with its own byte
// budget and exact accounting of what the daemon allocated on it. The default
// backend when no GPU is present, and a first-class one: every RPC works on it.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_
#define PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#include "server/device/device_backend.h"

namespace placement::server {

struct CpuBackendOptions {
  int num_devices = 8;
  // Budget per virtual device in bytes; 0 = half the machine's physical
  // memory divided evenly among the devices.
  int64_t device_memory_bytes = 0;
  int32_t process_index = 0;
  // Freed blocks kept per device for reuse by allocations of the same
  // rounded size (training loops and prefetch re-allocate the same shapes;
  // fresh pages cost a page fault per 4 KiB). Bytes in the cache do not
  // count as in use. 0 disables the cache.
  int64_t cache_bytes_per_device = int64_t{512} << 20;
};

class CpuBackend final : public DeviceBackend {
 public:
  // INVALID_ARGUMENT for num_devices outside [1, 1024] or a negative budget.
  static absl::StatusOr<std::unique_ptr<CpuBackend>> Create(const CpuBackendOptions& options);
  ~CpuBackend() override;

  absl::string_view Name() const override { return "cpu"; }
  const std::vector<DeviceDescription>& Devices() const override { return devices_; }
  int64_t MemoryInUse(int64_t device_id) const override;
  bool HostAddressable() const override { return true; }
  absl::StatusOr<std::unique_ptr<DeviceBuffer>> Allocate(int64_t device_id,
                                                         int64_t bytes) override;
  absl::Status Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) override;
  absl::Status Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) override;
  absl::Status Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                    absl::Span<const ByteRun> runs) override;

 protected:
  void Release(int64_t device_id, void* data, int64_t size) override;

 private:
  // Per-device cache of freed host blocks, keyed by rounded size.
  struct BlockCache {
    absl::Mutex mu;
    std::multimap<int64_t, void*> blocks ABSL_GUARDED_BY(mu);
    int64_t bytes ABSL_GUARDED_BY(mu) = 0;
  };

  CpuBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device);
  // Index into devices_ / in_use_, or -1.
  int LocalIndex(int64_t device_id) const;
  void* TakeCached(int idx, int64_t rounded);
  // True when the block was kept for reuse.
  bool CacheBlock(int idx, int64_t rounded, void* data);

  std::vector<DeviceDescription> devices_;
  std::unique_ptr<std::atomic<int64_t>[]> in_use_;
  const int64_t cache_limit_;
  std::unique_ptr<BlockCache[]> caches_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_
