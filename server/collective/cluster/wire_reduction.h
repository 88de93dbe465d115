// Reductions whose partial results travel between processes: a process
// first combines its own ranks' contributions, Gloo then combines one
// partial result per process, and each process finishes the result once.
// The partial results travel in a "wire" dtype chosen so that the numbers
// match the intra-node engine's (reduce_kernels.h):
//
//   dtype            op          wire   why
//   f16, bf16        any         f32    accumulate in f32, round once at the end
//   i8..i64, u8      MEAN        i64    exact sum, then division truncating
//                                       toward zero (i64 sums wrap past 2^63)
//   everything else  any         dtype  SUM / PROD of integers wrap in the
//                                       dtype, as everywhere
//
// Worked example: bf16 MEAN over 3 ranks of 1.0078125 on two processes (2 + 1
// ranks): process 0 sums 2.015625 in f32, process 1 contributes 1.0078125,
// Gloo sums 3.0234375 in f32, the finish divides by 3 in f32 and rounds once
// to bf16 (1.0078125). Summed in bf16, 3.0234375 would already have been
// rounded to 3.03125 on the wire.
//
// Pure functions over host memory; thread-safe. bool is not reducible
// (callers reject it first).
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_WIRE_REDUCTION_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_WIRE_REDUCTION_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "common/dtype.h"
#include "common/reduce_op.h"

namespace placement::server {

// The dtype partial results of `op` over `dtype` travel and combine in.
DType WireDType(DType dtype, ReduceOp op);

// The op Gloo combines partial results with: SUM for MEAN (divided once by
// FinishFromWire), `op` otherwise.
ReduceOp WireCombineOp(ReduceOp op);

// Combines `inputs` (each `count` elements of `dtype`) with WireCombineOp(op)
// into `wire` (`count` elements of WireDType(dtype, op)): widened, not
// narrowed, not divided.
// REQUIRES: inputs non-empty; `wire` does not overlap any input.
void ReduceToWire(DType dtype, ReduceOp op, absl::Span<const std::byte* const> inputs,
                  std::byte* wire, int64_t count);

// Turns `count` combined wire elements into the result: MEAN divides by
// `ranks` in the wire dtype, then the values are narrowed to `dtype` into
// `out`. `out` may be `wire` itself (narrowing in place).
// REQUIRES: ranks > 0 for MEAN.
void FinishFromWire(DType dtype, ReduceOp op, int64_t ranks, std::byte* wire, std::byte* out,
                    int64_t count);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_WIRE_REDUCTION_H_
