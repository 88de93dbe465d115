#include "server/platform/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "server/logging.h"

namespace placement::server {
namespace {

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) * page_size;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CpuBackend>> CpuBackend::Create(const CpuBackendOptions& options) {
  if (options.num_devices < 1 || options.num_devices > kMaxLocalDevices) {
    return absl::InvalidArgumentError(absl::StrCat("cpu_devices must be in [1, ", kMaxLocalDevices,
                                                   "], got ", options.num_devices));
  }
  if (options.cache_bytes_per_device < 0) {
    return absl::InvalidArgumentError("cache_bytes_per_device must be >= 0");
  }
  if (options.device_memory_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cpu_device_memory must be >= 0 bytes, got ", options.device_memory_bytes));
  }
  int64_t budget = options.device_memory_bytes;
  const int64_t physical = PhysicalMemoryBytes();
  if (budget == 0) budget = physical / 2 / options.num_devices;
  // Device memory is host memory here: budgets past it are promises the
  // host cannot keep (the OOM killer settles them), so say so at start.
  if (budget > physical / options.num_devices) {
    const int64_t total = budget <= std::numeric_limits<int64_t>::max() / options.num_devices
                              ? budget * options.num_devices
                              : std::numeric_limits<int64_t>::max();
    LogWarning(options.num_devices, " CPU devices x ", budget, " bytes = ", total,
               " bytes of budget, more than the host's ", physical,
               " bytes of physical memory: the daemon may be killed for memory before a budget "
               "refuses an allocation; lower --cpu_device_memory (0 = half of physical memory)");
  }
  std::vector<DeviceDescription> devices;
  for (int i = 0; i < options.num_devices; ++i) {
    DeviceDescription d;
    d.id = options.process_index * kMaxLocalDevices + i;
    d.process_index = options.process_index;
    d.local_index = i;
    d.platform = "cpu";
    d.device_kind = "cpu";
    d.hardware_type = HardwareType::kCpu;
    d.memory_total_bytes = budget;
    d.memory_limit_bytes = budget;
    devices.push_back(std::move(d));
  }
  return std::unique_ptr<CpuBackend>(
      new CpuBackend(std::move(devices), options.cache_bytes_per_device));
}

CpuBackend::~CpuBackend() { ReleaseCache(); }

int64_t CpuBackend::BlockSize(int64_t bytes) const { return HostBlockPool::BlockSize(bytes); }

absl::StatusOr<void*> CpuBackend::AllocateBlock(int local_index, int64_t block_bytes) {
  absl::StatusOr<void*> block = pool_.Allocate(block_bytes);
  if (!block.ok()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("device ", Devices()[local_index].id, ": ", block.status().message()));
  }
  return block;
}

void CpuBackend::FreeBlock(int, void* block, int64_t block_bytes) {
  pool_.Free(block, block_bytes);
}

absl::Status CpuBackend::Write(const void* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs) {
  auto* out = static_cast<char*>(dst.data());
  const auto* in = static_cast<const char*>(src);
  for (const ByteRun& r : runs) {
    if (r.length > 0) std::memcpy(out + r.dst_offset, in + r.src_offset, r.length);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Read(const DeviceBuffer& src, void* dst, absl::Span<const ByteRun> runs) {
  const auto* in = static_cast<const char*>(src.data());
  auto* out = static_cast<char*>(dst);
  for (const ByteRun& r : runs) {
    if (r.length > 0) std::memcpy(out + r.dst_offset, in + r.src_offset, r.length);
  }
  return absl::OkStatus();
}

absl::Status CpuBackend::Copy(const DeviceBuffer& src, DeviceBuffer& dst,
                              absl::Span<const ByteRun> runs) {
  const auto* in = static_cast<const char*>(src.data());
  auto* out = static_cast<char*>(dst.data());
  for (const ByteRun& r : runs) {
    if (r.length > 0) std::memmove(out + r.dst_offset, in + r.src_offset, r.length);
  }
  return absl::OkStatus();
}

}  // namespace placement::server
