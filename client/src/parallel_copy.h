// ParallelCopy: memcpy of large buffers split over a few threads, for the
// client-side copy into and out of staging regions (region_pool.h), so the
// automatic region path is not held to one core's copy speed. Not installed.
#ifndef PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
#define PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_

#include <cstddef>

namespace placement::client {

// memcpy(dst, src, n); copies of 16 MiB or more run on up to
// min(hardware threads, 8) threads, each at least 8 MiB, the caller's
// thread included. REQUIRES: the buffers do not overlap.
void ParallelCopy(void* dst, const void* src, size_t n);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_PARALLEL_COPY_H_
