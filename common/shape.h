// Tensor shapes: a list of non-negative dimension sizes, row-major.
#ifndef PLACEMENT_COMMON_SHAPE_H_
#define PLACEMENT_COMMON_SHAPE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/dtype.h"

namespace placement {

using Shape = std::vector<int64_t>;

// Product of the dimensions (1 for a scalar). REQUIRES: ValidateShape ok.
int64_t NumElements(absl::Span<const int64_t> shape);

// "[32,32]".
std::string ShapeToString(absl::Span<const int64_t> shape);

// "f32[32,32]".
std::string TypedShapeToString(DType dtype, absl::Span<const int64_t> shape);

// INVALID_ARGUMENT for negative dimensions, more than 16 dimensions, or a
// byte size that overflows int64 ("shape[1] is -3; dimensions must be >= 0").
absl::Status ValidateShape(absl::Span<const int64_t> shape, DType dtype);

// dtype size x elements. REQUIRES: ValidateShape ok.
int64_t ByteSize(DType dtype, absl::Span<const int64_t> shape);

}  // namespace placement

#endif  // PLACEMENT_COMMON_SHAPE_H_
