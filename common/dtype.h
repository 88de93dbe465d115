// Element types of tensors and their wire names.
//
// Pure value helpers; thread-safe. The names are the short forms used in
// messages and on the CLI ("f32", "bf16", "bool", ...). This is the one table
// of dtypes: the C++ client's names delegate to it, and the Python client's
// (python/placement/_dtypes.py) is tested against it
// (tests/python/placement/test_tables.py).
#ifndef PLACEMENT_COMMON_DTYPE_H_
#define PLACEMENT_COMMON_DTYPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placement {

enum class DType : int {
  kF32 = 1,
  kF64 = 2,
  kF16 = 3,
  kBF16 = 4,
  kI8 = 5,
  kI16 = 6,
  kI32 = 7,
  kI64 = 8,
  kU8 = 9,
  kBool = 10,
};

// Bytes per element (bool is one byte).
int64_t DTypeSize(DType dtype);

// "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool".
absl::string_view DTypeName(DType dtype);

// NumPy's name: "float32", ..., "bfloat16" (ml_dtypes), "bool_".
absl::string_view DTypeNumpyName(DType dtype);

// Every dtype, in wire-value order.
const std::vector<DType>& AllDTypes();

// Inverse of DTypeName; also accepts numpy names ("float32", "int64", ...).
// INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// From the proto enum's integer value; INVALID_ARGUMENT for UNSPECIFIED or
// unknown values.
absl::StatusOr<DType> DTypeFromProtoValue(int value);

bool IsFloatingPoint(DType dtype);

}  // namespace placement

#endif  // PLACEMENT_COMMON_DTYPE_H_
