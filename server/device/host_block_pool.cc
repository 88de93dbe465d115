#include "server/device/host_block_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/parallel_slices.h"
#include "server/device/device_backend.h"

namespace placement::server {
namespace {

constexpr int64_t kChunkBytes = int64_t{2} << 20;
constexpr int64_t kHugePageBytes = int64_t{2} << 20;

// A fresh memory file is populated in slices of at least 32 MiB on up to 4
// threads (so from 64 MiB on two or more). Shared memory in 4 KiB pages (the
// host's default, shmem_enabled "never") populated 256 MiB in 150-164 ms on
// one thread of a 2-core VM and 96-119 ms on two, which made a cold 256 MiB
// upload 1.2-1.3x faster (docs/python.md "Cold and warm transfers").
// Best effort: a failure leaves pages to fault in on first touch.
void PopulateWrite(char* data, int64_t bytes) {
  ForEachSlice(static_cast<size_t>(bytes),
               {.min_slice_bytes = size_t{32} << 20,
                .align_bytes = static_cast<size_t>(kHugePageBytes),
                .max_threads = 4},
               [data](size_t begin, size_t end) {
                 (void)madvise(data + begin, end - begin, MADV_POPULATE_WRITE);
               });
}

void* MapPages(int64_t bytes, bool small_blocks) {
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  // A huge page would make one small block resident as 2 MiB.
  if (small_blocks) (void)madvise(data, static_cast<size_t>(bytes), MADV_NOHUGEPAGE);
  return data;
}

// A sealed memory file of `bytes` mapped shared, and its fd; {nullptr, -1}
// when one cannot be made (the caller falls back to anonymous memory).
std::pair<void*, int> MapFile(int64_t bytes, bool populate) {
  const int fd = memfd_create("placementd-device", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return {nullptr, -1};
  void* data = MAP_FAILED;
  if (ftruncate(fd, bytes) == 0 && fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0) {
    data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_NORESERVE, fd, 0);
  }
  if (data == MAP_FAILED) {
    close(fd);
    return {nullptr, -1};
  }
  // Whole 2 MiB pages where the host lets shared memory have them
  // (/sys/kernel/mm/transparent_hugepage/shmem_enabled "advise" or more):
  // a reader's view of a large shard then faults once per 2 MiB instead of
  // once per 4 KiB (docs/api/views.md). Only over the block's whole 2 MiB
  // pages: its tail (and a smaller block) must not become resident as 2 MiB.
  // Without the host setting this is a no-op.
  const int64_t whole_huge_pages = bytes / kHugePageBytes * kHugePageBytes;
  if (whole_huge_pages > 0)
    (void)madvise(data, static_cast<size_t>(whole_huge_pages), MADV_HUGEPAGE);
  // A fresh block is written whole next (upload, reshard, collective):
  // populating it in one call costs about what anonymous memory's first-touch
  // faults do, where faulting shared memory page by page costs ~1.5x.
  if (populate) PopulateWrite(static_cast<char*>(data), bytes);
  return {data, fd};
}

}  // namespace

std::string HostBlockPool::SharedHugePageMode() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string line;
  if (!std::getline(file, line)) return "";
  const size_t open = line.find('[');
  const size_t close = line.find(']', open);
  if (open == std::string::npos || close == std::string::npos) return "";
  return line.substr(open + 1, close - open - 1);
}

HostBlockPool::HostBlockPool(int64_t max_file_blocks)
    : max_file_blocks_(max_file_blocks),
      small_shared_pages_([] {
        // No setting at all: a kernel without transparent huge pages.
        const std::string mode = SharedHugePageMode();
        return mode.empty() || mode == "never" || mode == "deny";
      }()),
      classes_(new SizeClass[kClasses]) {}

void* HostBlockPool::MapLarge(int64_t bytes) {
  bool file = false;
  {
    absl::MutexLock lock(&files_mu_);
    // Reserve the slot first so concurrent allocations stay within the bound.
    file = static_cast<int64_t>(files_.size()) + files_reserved_ < max_file_blocks_;
    if (file) ++files_reserved_;
  }
  if (file) {
    // A trainer's client fills a file written in place (OutsideWriterScope)
    // cheaper than populating it here: write(2) allocates 4 KiB shared
    // pages without zeroing or mapping them. Not where the file gets 2 MiB
    // pages: write(2) would not ask for them, and populating them is fast.
    const bool populate = !(small_shared_pages_ && OutsideWriterScope::Active());
    auto [data, fd] = MapFile(bytes, populate);
    absl::MutexLock lock(&files_mu_);
    --files_reserved_;
    if (data != nullptr) {
      files_.emplace(reinterpret_cast<uintptr_t>(data), fd);
      return data;
    }
  }
  return MapPages(bytes, /*small_blocks=*/false);
}

int HostBlockPool::FileOf(void* block) const {
  absl::MutexLock lock(&files_mu_);
  auto it = files_.find(reinterpret_cast<uintptr_t>(block));
  return it == files_.end() ? -1 : it->second;
}

int64_t HostBlockPool::file_blocks() const {
  absl::MutexLock lock(&files_mu_);
  return static_cast<int64_t>(files_.size());
}

HostBlockPool::~HostBlockPool() {
  {
    absl::MutexLock lock(&files_mu_);
    for (const auto& [block, fd] : files_) close(fd);  // blocks leaked by a caller bug
  }
  for (int c = 0; c < kClasses; ++c) {
    absl::MutexLock lock(&classes_[c].mu);
    for (auto& [base, chunk] : classes_[c].chunks) {
      munmap(chunk->base, static_cast<size_t>(chunk->slots * (c + 1) * kPageBytes));
    }
  }
}

int64_t HostBlockPool::BlockSize(int64_t bytes) {
  return std::max<int64_t>(1, (bytes + kPageBytes - 1) / kPageBytes) * kPageBytes;
}

absl::StatusOr<void*> HostBlockPool::Allocate(int64_t block_bytes) {
  if (block_bytes >= kMappedBlockBytes) {
    void* data = MapLarge(block_bytes);
    if (data == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrCat("host allocation of ", block_bytes, " bytes failed"));
    }
    return data;
  }
  const int64_t pages = block_bytes / kPageBytes;
  SizeClass& size_class = classes_[pages - 1];
  absl::MutexLock lock(&size_class.mu);
  if (size_class.partial.empty()) {
    const int64_t slots = std::max<int64_t>(1, kChunkBytes / block_bytes);
    void* base = MapPages(slots * block_bytes, /*small_blocks=*/true);
    if (base == nullptr) {
      return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", slots * block_bytes,
                                                       " bytes (a chunk of ", slots, " blocks of ",
                                                       block_bytes, " bytes) failed"));
    }
    auto chunk = std::make_unique<Chunk>();
    chunk->base = static_cast<char*>(base);
    chunk->slots = slots;
    // Slots handed out from the chunk's start first.
    for (int64_t s = slots - 1; s >= 0; --s) chunk->free_slots.push_back(static_cast<uint16_t>(s));
    size_class.partial.push_back(chunk.get());
    size_class.chunks.emplace(reinterpret_cast<uintptr_t>(base), std::move(chunk));
  }
  Chunk* chunk = size_class.partial.back();
  const uint16_t slot = chunk->free_slots.back();
  chunk->free_slots.pop_back();
  if (chunk->free_slots.empty()) size_class.partial.pop_back();
  return chunk->base + slot * block_bytes;
}

void HostBlockPool::Free(void* block, int64_t block_bytes) {
  if (block_bytes >= kMappedBlockBytes) {
    int fd = -1;
    {
      absl::MutexLock lock(&files_mu_);
      if (auto it = files_.find(reinterpret_cast<uintptr_t>(block)); it != files_.end()) {
        fd = it->second;
        files_.erase(it);
      }
    }
    munmap(block, static_cast<size_t>(block_bytes));
    if (fd >= 0) close(fd);
    return;
  }
  // The pages leave the resident set before the slot can be handed out
  // again (a fresh allocation then reads zeros, as from mmap).
  (void)madvise(block, static_cast<size_t>(block_bytes), MADV_DONTNEED);
  const int64_t pages = block_bytes / kPageBytes;
  SizeClass& size_class = classes_[pages - 1];
  char* empty_base = nullptr;
  int64_t empty_bytes = 0;
  {
    absl::MutexLock lock(&size_class.mu);
    auto it = size_class.chunks.upper_bound(reinterpret_cast<uintptr_t>(block));
    if (it == size_class.chunks.begin()) return;  // not ours: a caller bug
    --it;
    Chunk* chunk = it->second.get();
    const int64_t slot = (static_cast<char*>(block) - chunk->base) / block_bytes;
    if (chunk->free_slots.empty()) size_class.partial.push_back(chunk);
    chunk->free_slots.push_back(static_cast<uint16_t>(slot));
    if (static_cast<int64_t>(chunk->free_slots.size()) == chunk->slots) {
      // Every slot free: the chunk goes (its address space too).
      size_class.partial.erase(
          std::find(size_class.partial.begin(), size_class.partial.end(), chunk));
      empty_base = chunk->base;
      empty_bytes = chunk->slots * block_bytes;
      size_class.chunks.erase(it);
    }
  }
  if (empty_base != nullptr) munmap(empty_base, static_cast<size_t>(empty_bytes));
}

int64_t HostBlockPool::chunks() const {
  int64_t n = 0;
  for (int c = 0; c < kClasses; ++c) {
    absl::MutexLock lock(&classes_[c].mu);
    n += static_cast<int64_t>(classes_[c].chunks.size());
  }
  return n;
}

}  // namespace placement::server
