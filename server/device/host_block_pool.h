// HostBlockPool: page-granular host memory blocks whose pages go back to the
// system the moment a block is freed -- the CPU platform's device memory.
//
// A fresh memory file is populated (on threads from 64 MiB) before it is
// handed out -- unless an outside writer fills it (OutsideWriterScope,
// device_backend.h) and shared memory has 4 KiB pages: then it comes with
// no pages at all (a reservation that ends unwritten may give it to the
// tenant's block cache so; its pages then fault in on its next use).
//
// Blocks of kMappedBlockBytes and more are mappings of their own
// (mmap/munmap), of a memory file (memfd "placementd-device", sealed
// against shrinking and growing) while fewer than `max_file_blocks` such
// blocks are live, anonymous otherwise: the file is what lets a same-host
// reader map the block read-only (FileOf, CpuBackend::ExportShard). Freeing
// one unmaps it and closes its file; its pages leave the system once no
// reader maps them either. Smaller ones come from slabs: for each size in whole pages
// (1..63 pages) a list of chunks of up to 2 MiB mapped for that size alone,
// cut into equal slots. Freeing a small block discards its pages
// (MADV_DONTNEED) before the slot is reused, and a chunk whose slots are all
// free is unmapped. So the pool's resident memory is exactly the pages of the
// blocks handed out and not yet freed -- under any mix of sizes and any
// order of frees. (malloc, which served small blocks before, kept freed
// memory in its arenas: 60,000 one-byte tensors deleted left 334 MiB.)
//
// Slots of one size never fragment each other; a chunk stays mapped while
// one of its slots is live, which costs address space, not memory. Chunks
// are mapped with MADV_NOHUGEPAGE, so a transparent huge page never makes
// one small block resident as 2 MiB.
//
// Thread-safe: one lock per block size, one for the memory files; the
// system calls that discard pages run outside them.
#ifndef PLACEMENT_SERVER_DEVICE_HOST_BLOCK_POOL_H_
#define PLACEMENT_SERVER_DEVICE_HOST_BLOCK_POOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

class HostBlockPool {
 public:
  static constexpr int64_t kPageBytes = 4096;
  // From this size up a block is a mapping of its own.
  static constexpr int64_t kMappedBlockBytes = 256 * 1024;

  // At most `max_file_blocks` large blocks at once are memory files (each
  // holds a descriptor); 0 makes every block anonymous.
  explicit HostBlockPool(int64_t max_file_blocks = 0);
  // REQUIRES: every block was freed.
  ~HostBlockPool();
  HostBlockPool(const HostBlockPool&) = delete;
  HostBlockPool& operator=(const HostBlockPool&) = delete;

  // The host's transparent huge page mode for shared memory (the bracketed
  // word of /sys/kernel/mm/transparent_hugepage/shmem_enabled: "never",
  // "advise", "within_size", "always", ...), "" when unknown. Memory-file
  // blocks ask for 2 MiB pages, which the host grants unless it is "never"
  // or "deny".
  static std::string SharedHugePageMode();

  // `bytes` rounded up to whole pages (at least one): the size of the block
  // that serves it, and what it costs.
  static int64_t BlockSize(int64_t bytes);

  // A page-aligned block of `block_bytes` (a BlockSize). RESOURCE_EXHAUSTED
  // when the system has no memory or address space left.
  absl::StatusOr<void*> Allocate(int64_t block_bytes);
  // Frees a block Allocate returned with the same `block_bytes`; its pages
  // leave the process's resident set at once.
  void Free(void* block, int64_t block_bytes);

  // The memory file (memfd) mapped at `block`, or -1: a small block, or a
  // large one made while max_file_blocks were live. The pool owns the fd; it
  // stays open until the block is freed.
  int FileOf(void* block) const;

  // Chunks mapped now (small blocks), for tests and the pool's own checks.
  int64_t chunks() const;
  // Large blocks that are memory files now.
  int64_t file_blocks() const;
  int64_t max_file_blocks() const { return max_file_blocks_; }

 private:
  struct Chunk {
    char* base = nullptr;
    int64_t slots = 0;
    std::vector<uint16_t> free_slots;
  };
  // Every small block of one size (in pages).
  struct SizeClass {
    absl::Mutex mu;
    // By base address, to find a block's chunk.
    std::map<uintptr_t, std::unique_ptr<Chunk>> chunks ABSL_GUARDED_BY(mu);
    // Chunks with a free slot.
    std::vector<Chunk*> partial ABSL_GUARDED_BY(mu);
  };
  static constexpr int kClasses = static_cast<int>(kMappedBlockBytes / kPageBytes);
  // A large block: a memory file when possible, else anonymous (nullptr).
  void* MapLarge(int64_t bytes);

  const int64_t max_file_blocks_;
  // Shared memory gets 4 KiB pages only (SharedHugePageMode "never" or
  // "deny"): a memory file an outside writer fills is left unpopulated.
  const bool small_shared_pages_;
  std::unique_ptr<SizeClass[]> classes_;
  mutable absl::Mutex files_mu_;
  // Large blocks that are memory files: address -> fd.
  absl::flat_hash_map<uintptr_t, int> files_ ABSL_GUARDED_BY(files_mu_);
  // Memory files being made now (counted against max_file_blocks_).
  int64_t files_reserved_ ABSL_GUARDED_BY(files_mu_) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_HOST_BLOCK_POOL_H_
