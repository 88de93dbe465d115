#include "common/dtype.h"

#include <array>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace placement {
namespace {

struct DTypeEntry {
  DType dtype;
  absl::string_view name;
  absl::string_view numpy_name;
  int64_t size;
};

constexpr std::array<DTypeEntry, 10> kDTypes = {{
    {DType::kF32, "f32", "float32", 4},
    {DType::kF64, "f64", "float64", 8},
    {DType::kF16, "f16", "float16", 2},
    {DType::kBF16, "bf16", "bfloat16", 2},
    {DType::kI8, "i8", "int8", 1},
    {DType::kI16, "i16", "int16", 2},
    {DType::kI32, "i32", "int32", 4},
    {DType::kI64, "i64", "int64", 8},
    {DType::kU8, "u8", "uint8", 1},
    {DType::kBool, "bool", "bool_", 1},
}};

const DTypeEntry* Find(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return &e;
  }
  return nullptr;
}

}  // namespace

int64_t DTypeSize(DType dtype) {
  const DTypeEntry* e = Find(dtype);
  return e == nullptr ? 0 : e->size;
}

absl::string_view DTypeNumpyName(DType dtype) {
  const DTypeEntry* e = Find(dtype);
  return e == nullptr ? "invalid" : e->numpy_name;
}

const std::vector<DType>& AllDTypes() {
  static const auto* all = [] {
    auto* v = new std::vector<DType>;
    for (const auto& e : kDTypes) v->push_back(e.dtype);
    return v;
  }();
  return *all;
}

absl::string_view DTypeName(DType dtype) {
  const DTypeEntry* e = Find(dtype);
  return e == nullptr ? "invalid" : e->name;
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  std::string lower = absl::AsciiStrToLower(name);
  for (const auto& e : kDTypes) {
    if (lower == e.name || lower == e.numpy_name) return e.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype '", name,
                   "'; expected one of f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool"));
}

absl::StatusOr<DType> DTypeFromProtoValue(int value) {
  for (const auto& e : kDTypes) {
    if (static_cast<int>(e.dtype) == value) return e.dtype;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("dtype must be set to one of f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool "
                   "(got enum value ",
                   value, ")"));
}

bool IsFloatingPoint(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF64 || dtype == DType::kF16 ||
         dtype == DType::kBF16;
}

}  // namespace placement
