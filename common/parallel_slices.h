// ForEachSlice: runs fn(begin, end) over [0, n) cut into aligned slices on a
// few threads, the caller's included -- the one way the daemon and the
// client split large page-touching work (populating a fresh memory file,
// mapping it, copying into it) over cores.
#ifndef PLACEMENT_COMMON_PARALLEL_SLICES_H_
#define PLACEMENT_COMMON_PARALLEL_SLICES_H_

#include <cstddef>

#include "absl/functional/function_ref.h"

namespace placement {

struct SliceOptions {
  // No slice is smaller than this (so n < 2 * min_slice_bytes runs in one
  // piece, on the calling thread).
  size_t min_slice_bytes = size_t{8} << 20;
  // Slice boundaries are multiples of this (a page, a huge page).
  size_t align_bytes = 4096;
  // At most this many slices, and at most the host's hardware threads.
  size_t max_threads = 8;
};

// Calls fn(begin, end) for disjoint [begin, end) covering [0, n), each on
// its own thread but the first, which runs on the caller's; returns once
// every call returned.
void ForEachSlice(size_t n, const SliceOptions& options,
                  absl::FunctionRef<void(size_t begin, size_t end)> fn);

}  // namespace placement

#endif  // PLACEMENT_COMMON_PARALLEL_SLICES_H_
