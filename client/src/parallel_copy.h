// ParallelCopy: memcpy of large buffers split over a few threads, for the
// client-side copy into and out of staging regions (region_pool.h) and the
// daemon's memory (in place), so those paths are not held to one core's copy
// speed; PopulateMapping maps a fresh mapping's pages the same way. Not
// installed.
#ifndef PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
#define PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_

#include <cstddef>

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

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
