// ParallelCopy: memcpy of large buffers split over a few threads, for the
// client-side copy into and out of staging regions (region_pool.h) and the
// daemon's memory (in place), so those paths are not held to one core's copy
// speed; PopulateMapping maps a fresh mapping's pages the same way, and
// FillFreshFile fills a memory file that has no pages yet. Not installed.
#ifndef PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
#define PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_

#include <cstddef>
#include <cstdint>

namespace placement::client {

// memcpy(dst, src, n) in ForEachSlice's default slices (common/
// parallel_slices.h): copies of 16 MiB or more on up to min(hardware
// threads, 8) threads, each at least 8 MiB, the caller's thread included.
// REQUIRES: the buffers do not overlap.
void ParallelCopy(void* dst, const void* src, size_t n);

// Maps every page of the shared file mapping [base, base + n) into this
// process now (MADV_POPULATE_READ, sliced over threads as ParallelCopy):
// the daemon's memory file already holds the pages, and writing through a
// fresh mapping otherwise takes a page fault per 4 KiB (on a 2-core VM, with
// a build running beside it, a 256 MiB copy into a fresh mapping took
// 114-181 ms on two threads, populated first 70-92 ms in all). Best effort: on kernels before 5.14,
// or on error, the writes fault the pages in. REQUIRES: base is page-aligned.
void PopulateMapping(void* base, size_t n);

// Brings in the pages that hold [at, at + n) of a shared file mapping for
// writing (MADV_POPULATE_WRITE, sliced as ParallelCopy; `at` need not be
// page-aligned): for a range of a file with no pages that is written
// piecemeal. Best effort, as PopulateMapping.
void PopulateRange(std::byte* at, size_t n);

// Whether the file `fd` holds no pages yet (st_blocks 0): a fresh memory
// file the daemon left for its writer to fill (an upload written in place).
bool FileHasNoPages(int fd);

// Writes src[0, n) to bytes [offset, offset + n) of the memory file `fd`,
// which is mapped read-write with those bytes at `mapped`. For a file whose
// pages do not exist yet (FileHasNoPages): write(2) allocates a page and
// copies into it without zeroing it or mapping it here, the cheapest way to
// fill shared memory in 4 KiB pages, but the kernel runs one writer per file
// at a time. So from 16 MiB the first part goes through pwrite on the
// calling thread while other threads populate (MADV_POPULATE_WRITE) and copy
// the rest through the mapping, the parts sized so both end together (on a
// 2-core VM 256 MiB filled in 77-90 ms, where populating the file took 85
// ms on two threads and a copy into it 33 ms more on one). Only the rest's pages are
// mapped here afterwards. Falls back to memcpy for anything pwrite refuses.
// REQUIRES: mapped is `offset` bytes into a page-aligned mapping.
void FillFreshFile(int fd, int64_t offset, std::byte* mapped, const std::byte* src, size_t n);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
