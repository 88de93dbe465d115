// CpuBackend: N virtual devices in host memory, each with its own byte
// budget and exact accounting of what the daemon allocated on it. The default
// backend when no GPU is present, and a first-class one: every RPC works on it.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_
#define PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_

#include <atomic>
#include <memory>
#include <vector>


#include "server/device/block_cache.h"
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
  CpuBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device);
  // Index into devices_ / in_use_, or -1.
  int LocalIndex(int64_t device_id) const;

  std::vector<DeviceDescription> devices_;
  std::unique_ptr<std::atomic<int64_t>[]> in_use_;
  std::vector<std::unique_ptr<BlockCache>> caches_;  // per device, freed host blocks
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_CPU_CPU_BACKEND_H_
