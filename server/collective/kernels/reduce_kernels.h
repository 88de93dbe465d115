// Element-wise reduction kernels shared by the engines that reduce on the host
// (LocalEngine; the gloo transport pairwise): n input ranges reduced
// into one result written to one or more output ranges, in cache-sized
// sub-blocks, so a chunk is read once from each input and written once to
// each output.
//
// Accumulation (the result is then narrowed to the dtype):
//   f32: f32    f64: f64    f16, bf16: f32 (rounded to nearest even once)
//   integers, SUM / PROD: modular arithmetic in the dtype's width (wraps,
//     as NCCL and two's-complement hardware do)
//   integers, MEAN: exact sum in 64 bits (128 for i64), then division
//     truncating toward zero: mean(-3, -4) = -3, mean(u8 200, 255) = 227.
//   MAX / MIN on floats propagate NaN.
// bool is not reducible (callers reject it first).
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_KERNELS_REDUCE_KERNELS_H_
#define PLACEMENT_SERVER_COLLECTIVE_KERNELS_REDUCE_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "absl/types/span.h"
#include "common/dtype.h"
#include "common/reduce_op.h"

namespace placement::server {

// Reduces `count` elements starting at each of `inputs` with `op` (MEAN
// divides by inputs.size()) and writes the result starting at each of
// `outputs`. An output may be one of the inputs (in place); otherwise
// outputs must not overlap inputs or each other.
// REQUIRES: dtype != kBool; inputs non-empty; every range holds `count`
// elements.
void ReduceInto(DType dtype, ReduceOp op, absl::Span<const std::byte* const> inputs,
                absl::Span<std::byte* const> outputs, int64_t count);

// Divides `count` elements at `data` by `divisor` in place, with ReduceInto's
// MEAN rounding (floats: in f32/f64 then narrowed; integers: truncating
// toward zero). Engines that sum pairwise (Gloo) finish MEAN with it.
// REQUIRES: dtype != kBool; divisor > 0.
void DivideInPlace(DType dtype, std::byte* data, int64_t count, int64_t divisor);

// Whether ReduceInto supports `dtype` (every dtype but bool).
bool IsReducible(DType dtype);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_KERNELS_REDUCE_KERNELS_H_
