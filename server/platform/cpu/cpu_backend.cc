#include "server/platform/cpu/cpu_backend.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/logging.h"

namespace placement::server {
namespace {

int64_t PhysicalMemoryBytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) return int64_t{8} << 30;
  return static_cast<int64_t>(pages) * page_size;
}

// Half the open-file limit, after raising the soft limit to the hard one:
// every exportable block holds a descriptor, and the other half stays for
// connections, regions and the rest.
int64_t DefaultMaxFileBlocks() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return int64_t{1} << 20;
  return static_cast<int64_t>(limit.rlim_cur / 2);
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
  const int64_t max_file_blocks =
      options.max_file_blocks >= 0 ? options.max_file_blocks : DefaultMaxFileBlocks();
  if (max_file_blocks > 0) {
    const std::string huge = HostBlockPool::SharedHugePageMode();
    if (huge == "never" || huge == "deny") {
      LogInfo(
          "views and in-place transfers: shared memory has 4 KiB pages only "
          "(transparent_hugepage/shmem_enabled is ",
          huge,
          "); with \"advise\" a view's first read of a large shard faults 512x less and a "
          "first upload written in place runs faster (docs/operations.md)");
    }
  }
  return std::unique_ptr<CpuBackend>(
      new CpuBackend(std::move(devices), options.cache_bytes_per_device, max_file_blocks));
}

CpuBackend::~CpuBackend() {
  StopRefills();
  ReleaseCache();
}

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
  {
    absl::MutexLock lock(&exported_mu_);
    exported_.erase(block);
  }
  pool_.Free(block, block_bytes);
}

bool CpuBackend::Reusable(int, void* block, int64_t block_bytes) const {
  if (block_bytes >= HostBlockPool::kMappedBlockBytes && pool_.FileOf(block) < 0) return false;
  absl::MutexLock lock(&exported_mu_);
  return !exported_.contains(block);
}

bool CpuBackend::RefillsWhenFreed(int, void* block, int64_t block_bytes) const {
  if (block_bytes < HostBlockPool::kMappedBlockBytes) return false;
  // A refill never takes one of the last memory-file slots: an export past
  // the bound needs one for its copy.
  if (pool_.file_blocks() + 2 > pool_.max_file_blocks()) return false;
  absl::MutexLock lock(&exported_mu_);
  return exported_.contains(block);
}

int64_t CpuBackend::exported_blocks() const {
  absl::MutexLock lock(&exported_mu_);
  return static_cast<int64_t>(exported_.size());
}

absl::StatusOr<int> CpuBackend::ExportFile(void* block, int fd) {
  bool marked_here = false;
  {
    // Marked before any reader can have it: from now on the block is freed,
    // never cached, when its buffer goes.
    absl::MutexLock lock(&exported_mu_);
    marked_here = exported_.insert(block).second;
  }
  // F_SEAL_FUTURE_WRITE keeps the daemon's mapping writable but refuses
  // every new writable mapping, write() and hole punch, through any fd --
  // also one a reader re-opens read-write through /proc. F_SEAL_SEAL last.
  constexpr int kSeals = F_SEAL_FUTURE_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 ||
      ((seals & F_SEAL_SEAL) == 0 && fcntl(fd, F_ADD_SEALS, kSeals | F_SEAL_SEAL) != 0)) {
    return absl::InternalError(
        absl::StrCat("cannot seal a memory file for export: ", std::strerror(errno)));
  }
  // A tenant's writer may have sealed its block with F_SEAL_SEAL before our
  // seals: then the file is not read-only for everyone, and the caller
  // exports a private copy instead.
  if ((fcntl(fd, F_GET_SEALS) & kSeals) != kSeals) {
    // Nothing was sealed here and no reader has the file: the block stays
    // its writer's, reusable and writable in place as before.
    if (marked_here) {
      absl::MutexLock lock(&exported_mu_);
      exported_.erase(block);
    }
    return absl::FailedPreconditionError("the memory file is sealed without F_SEAL_FUTURE_WRITE");
  }
  const std::string path = absl::StrCat("/proc/self/fd/", fd);
  const int reader = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (reader < 0) {
    const int error = errno;
    return error == EMFILE || error == ENFILE
               ? absl::ResourceExhaustedError(
                     absl::StrCat("no descriptor left to export a block: ", std::strerror(error)))
               : absl::InternalError(
                     absl::StrCat("cannot re-open ", path, " read-only: ", std::strerror(error)));
  }
  return reader;
}

absl::StatusOr<std::unique_ptr<ShardExport>> CpuBackend::ExportShard(const DeviceBuffer& buffer) {
  auto out = std::make_unique<ShardExport>();
  out->size = buffer.size();
  if (buffer.size() == 0) return out;
  void* block = buffer.data();
  int file = pool_.FileOf(block);
  if (file >= 0) {
    absl::StatusOr<int> reader = ExportFile(block, file);
    if (reader.ok() || !absl::IsFailedPrecondition(reader.status())) {
      if (!reader.ok()) return reader.status();
      out->fd = *reader;
      return out;
    }
    file = -1;  // sealed by its writer without our seals: a private copy
  }
  if (file < 0) {
    // A slab block (others' bytes beside it) or an anonymous one: a private
    // copy in a memory file of its own, charged like any buffer.
    ASSIGN_OR_RETURN(
        out->copy,
        Allocate(buffer.device_id(), std::max(buffer.size(), HostBlockPool::kMappedBlockBytes)));
    block = out->copy->data();
    file = pool_.FileOf(block);
    if (file < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "device ", buffer.device_id(), ": no memory file left to export ", buffer.size(),
          " bytes (", pool_.file_blocks(), " blocks are memory files, the bound)"));
    }
    std::memcpy(block, buffer.data(), static_cast<size_t>(buffer.size()));
  }
  ASSIGN_OR_RETURN(out->fd, ExportFile(block, file));
  return out;
}

absl::StatusOr<std::unique_ptr<ShardExport>> CpuBackend::ExportWritable(const DeviceBuffer& buffer,
                                                                        MemoryOwnerTag owner) {
  if (buffer.owner() == kDaemonMemory || buffer.owner() != owner) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", buffer.device_id(), ": a buffer of ", buffer.size(), " bytes of ",
        buffer.owner() == kDaemonMemory ? std::string("the daemon's own memory")
                                        : absl::StrCat("memory owner ", buffer.owner()),
        " is never handed out for writing to memory owner ", owner));
  }
  auto out = std::make_unique<ShardExport>();
  out->size = buffer.size();
  if (buffer.size() == 0) return out;
  const int file = pool_.FileOf(buffer.data());
  if (file < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("device ", buffer.device_id(), ": a buffer of ", buffer.size(), " bytes ",
                     buffer.size() < HostBlockPool::kMappedBlockBytes
                         ? absl::StrCat("shares its memory with others (under ",
                                        HostBlockPool::kMappedBlockBytes, " bytes)")
                         : absl::StrCat("is not a memory file (", pool_.file_blocks(),
                                        " blocks are memory files, the bound)"),
                     ", so it cannot be written in place; upload it through a region"));
  }
  // A block sealed for a read-only export is never reused, so a fresh or
  // re-used tenant block has no write seal; a writer that sealed its own
  // block only keeps itself from writing it again.
  {
    absl::MutexLock lock(&exported_mu_);
    if (exported_.contains(buffer.data())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "device ", buffer.device_id(), ": the buffer is exported read-only (a view)"));
    }
  }
  const int seals = fcntl(file, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "device ", buffer.device_id(), ": the buffer's memory file is sealed against writes"));
  }
  const std::string path = absl::StrCat("/proc/self/fd/", file);
  out->fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (out->fd < 0) {
    const int error = errno;
    return error == EMFILE || error == ENFILE
               ? absl::ResourceExhaustedError(
                     absl::StrCat("no descriptor left to hand out a block: ", std::strerror(error)))
               : absl::InternalError(
                     absl::StrCat("cannot re-open ", path, ": ", std::strerror(error)));
  }
  out->file_size = BlockSize(buffer.size());
  return out;
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
