#include "server/platform/cpu/cpu_backend.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

constexpr int64_t kAlignment = 64;

// Blocks from this size up are mapped pages of their own (mmap/munmap), so a
// freed block leaves the process at once: malloc would keep it in one of its
// arenas (glibc raises its mmap threshold after the first large free), and the
// daemon's RSS would grow past the device budget under an upload/delete churn
// of varying sizes (tests/integration/rss_churn_test.cc). Smaller blocks come
// from malloc, so that many tiny tensors do not cost a mapping each.
constexpr int64_t kMappedBlockBytes = 256 * 1024;

// Blocks are sized in whole pages so that cached blocks match allocations of
// nearby sizes too.
int64_t RoundedSize(int64_t bytes) {
  constexpr int64_t kPage = 4096;
  return (bytes + kPage - 1) / kPage * kPage;
}

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
  if (budget == 0) budget = PhysicalMemoryBytes() / 2 / options.num_devices;
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

int64_t CpuBackend::BlockSize(int64_t bytes) const { return RoundedSize(bytes); }

absl::StatusOr<void*> CpuBackend::AllocateBlock(int local_index, int64_t block_bytes) {
  void* data = nullptr;
  if (block_bytes >= kMappedBlockBytes) {
    data = mmap(nullptr, static_cast<size_t>(block_bytes), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) data = nullptr;
  } else {
    data = std::aligned_alloc(kAlignment, static_cast<size_t>(block_bytes));
  }
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("device ", Devices()[local_index].id,
                                                     ": host allocation of ", block_bytes,
                                                     " bytes failed"));
  }
  return data;
}

void CpuBackend::FreeBlock(int, void* block, int64_t block_bytes) {
  if (block_bytes >= kMappedBlockBytes) {
    munmap(block, static_cast<size_t>(block_bytes));
  } else {
    std::free(block);
  }
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
