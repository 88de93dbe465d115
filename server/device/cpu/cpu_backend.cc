#include "server/device/cpu/cpu_backend.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

constexpr int64_t kAlignment = 64;

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
    return absl::InvalidArgumentError(absl::StrCat("cpu_device_memory must be >= 0 bytes, got ",
                                                   options.device_memory_bytes));
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

CpuBackend::CpuBackend(std::vector<DeviceDescription> devices, int64_t cache_bytes_per_device)
    : devices_(std::move(devices)),
      in_use_(std::make_unique<std::atomic<int64_t>[]>(devices_.size())) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    in_use_[i].store(0);
    caches_.push_back(std::make_unique<BlockCache>(cache_bytes_per_device));
  }
}

CpuBackend::~CpuBackend() {
  for (auto& cache : caches_) cache->Clear([](void* block) { std::free(block); });
}

int CpuBackend::LocalIndex(int64_t device_id) const {
  if (devices_.empty()) return -1;
  int64_t local = device_id - devices_.front().id;
  if (local < 0 || local >= static_cast<int64_t>(devices_.size())) return -1;
  return static_cast<int>(local);
}

int64_t CpuBackend::MemoryInUse(int64_t device_id) const {
  int idx = LocalIndex(device_id);
  return idx < 0 ? 0 : in_use_[idx].load(std::memory_order_relaxed);
}

absl::StatusOr<std::unique_ptr<DeviceBuffer>> CpuBackend::Allocate(int64_t device_id,
                                                                   int64_t bytes) {
  int idx = LocalIndex(device_id);
  if (idx < 0) {
    return absl::NotFoundError(absl::StrCat("device ", device_id, " does not exist; this daemon has ",
                                            devices_.size(), " cpu devices"));
  }
  if (bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("allocation size must be >= 0, got ", bytes));
  }
  const int64_t limit = devices_[idx].memory_limit_bytes;
  // Reserve first so concurrent allocations cannot both pass the check.
  int64_t before = in_use_[idx].fetch_add(bytes);
  if (before + bytes > limit) {
    in_use_[idx].fetch_sub(bytes);
    return absl::ResourceExhaustedError(
        absl::StrCat("device ", device_id, ": cannot allocate ", bytes, " bytes; ", before, " of ",
                     limit, " bytes in use"));
  }
  void* data = nullptr;
  if (bytes > 0) {
    const int64_t rounded = RoundedSize(bytes);
    data = caches_[idx]->Take(rounded);
    if (data == nullptr) data = std::aligned_alloc(kAlignment, rounded);
    if (data == nullptr) {
      in_use_[idx].fetch_sub(bytes);
      return absl::ResourceExhaustedError(
          absl::StrCat("device ", device_id, ": host allocation of ", bytes, " bytes failed"));
    }
  }
  return std::make_unique<DeviceBuffer>(this, device_id, data, bytes);
}

void CpuBackend::Release(int64_t device_id, void* data, int64_t size) {
  int idx = LocalIndex(device_id);
  if (data != nullptr && (idx < 0 || !caches_[idx]->Put(RoundedSize(size), data))) std::free(data);
  if (idx >= 0) in_use_[idx].fetch_sub(size);
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
