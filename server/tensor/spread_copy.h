// SpreadOverThreads: runs one large host copy (an upload's or download's
// byte range) as a few contiguous slices on several threads at once, so a
// same-host region transfer runs at memory bandwidth rather than one core's
// memcpy speed. Small ranges (under kSpreadMinSliceBytes per thread) run on
// the calling thread alone, so chunk-sized gRPC transfers pay nothing.
//
// Thread-safe; `fn` must be safe to call concurrently on disjoint slices
// (DeviceBackend Write/Read are).
#ifndef PLACEMENT_SERVER_TENSOR_SPREAD_COPY_H_
#define PLACEMENT_SERVER_TENSOR_SPREAD_COPY_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace placement::server {

// A thread gets at least this many bytes.
inline constexpr int64_t kSpreadMinSliceBytes = int64_t{8} << 20;
// At most this many threads per copy.
inline constexpr int kSpreadMaxThreads = 8;

// Splits [begin, end) into up to min(hardware threads, kSpreadMaxThreads,
// length / kSpreadMinSliceBytes) contiguous slices and calls fn(lo, hi) for
// each, one on the calling thread; returns the first error (every slice runs
// to completion either way). REQUIRES: begin <= end.
absl::Status SpreadOverThreads(int64_t begin, int64_t end,
                               absl::FunctionRef<absl::Status(int64_t lo, int64_t hi)> fn);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_SPREAD_COPY_H_
