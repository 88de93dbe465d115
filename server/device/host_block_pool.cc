#include "server/device/host_block_pool.h"

#include <sys/mman.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

constexpr int64_t kChunkBytes = int64_t{2} << 20;

void* MapPages(int64_t bytes, bool small_blocks) {
  void* data = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (data == MAP_FAILED) return nullptr;
  // A huge page would make one small block resident as 2 MiB.
  if (small_blocks) (void)madvise(data, static_cast<size_t>(bytes), MADV_NOHUGEPAGE);
  return data;
}

}  // namespace

HostBlockPool::HostBlockPool() : classes_(new SizeClass[kClasses]) {}

HostBlockPool::~HostBlockPool() {
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
    void* data = MapPages(block_bytes, /*small_blocks=*/false);
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
    munmap(block, static_cast<size_t>(block_bytes));
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
