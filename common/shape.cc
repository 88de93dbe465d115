#include "common/shape.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement {

int64_t NumElements(absl::Span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeToString(absl::Span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ","), "]");
}

std::string TypedShapeToString(DType dtype, absl::Span<const int64_t> shape) {
  return absl::StrCat(DTypeName(dtype), ShapeToString(shape));
}

absl::Status ValidateShape(absl::Span<const int64_t> shape, DType dtype) {
  constexpr size_t kMaxRank = 16;
  if (shape.size() > kMaxRank) {
    return absl::InvalidArgumentError(
        absl::StrCat("shape has rank ", shape.size(), "; at most ", kMaxRank, " is supported"));
  }
  int64_t bytes = DTypeSize(dtype);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", i, "] is ", shape[i], "; dimensions must be >= 0"));
    }
    if (shape[i] != 0 && bytes > std::numeric_limits<int64_t>::max() / shape[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape ", ShapeToString(shape), " is too large: its byte size overflows int64"));
    }
    bytes *= shape[i];
  }
  return absl::OkStatus();
}

int64_t ByteSize(DType dtype, absl::Span<const int64_t> shape) {
  return DTypeSize(dtype) * NumElements(shape);
}

}  // namespace placement
