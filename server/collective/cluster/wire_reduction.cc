#include "server/collective/cluster/wire_reduction.h"

#include <cstring>

#include "server/collective/kernels/half_float.h"
#include "server/collective/kernels/reduce_kernels.h"

namespace placement::server {
namespace {

// Elements converted per step: the wire-typed temporary (8 KiB) stays in L1.
constexpr int64_t kStep = 1024;

template <typename From, typename To, typename Conv>
void ConvertTyped(const std::byte* src, std::byte* dst, int64_t count, Conv conv) {
  // Element by element through a local copy, so narrowing in place (dst ==
  // src, sizeof(To) <= sizeof(From)) never overwrites an unread element.
  for (int64_t i = 0; i < count; ++i) {
    From v;
    std::memcpy(&v, src + i * sizeof(From), sizeof(From));
    const To w = conv(v);
    std::memcpy(dst + i * sizeof(To), &w, sizeof(To));
  }
}

template <typename T>
int64_t ToI64(T v) {
  return static_cast<int64_t>(v);
}

// dtype -> WireDType(dtype, op), for the dtypes where they differ.
void Widen(DType dtype, const std::byte* src, std::byte* dst, int64_t count) {
  switch (dtype) {
    case DType::kF16:
      return ConvertTyped<uint16_t, float>(src, dst, count, F16ToFloat);
    case DType::kBF16:
      return ConvertTyped<uint16_t, float>(src, dst, count, Bf16ToFloat);
    case DType::kI8:
      return ConvertTyped<int8_t, int64_t>(src, dst, count, ToI64<int8_t>);
    case DType::kI16:
      return ConvertTyped<int16_t, int64_t>(src, dst, count, ToI64<int16_t>);
    case DType::kI32:
      return ConvertTyped<int32_t, int64_t>(src, dst, count, ToI64<int32_t>);
    case DType::kU8:
      return ConvertTyped<uint8_t, int64_t>(src, dst, count, ToI64<uint8_t>);
    default:  // f32, f64, i64: never widened (WireDType is the dtype)
      return;
  }
}

template <typename T>
T FromI64(int64_t v) {
  return static_cast<T>(v);
}

// WireDType(dtype, op) -> dtype, for the dtypes where they differ; in place
// allowed.
void Narrow(DType dtype, const std::byte* src, std::byte* dst, int64_t count) {
  switch (dtype) {
    case DType::kF16:
      return ConvertTyped<float, uint16_t>(src, dst, count, FloatToF16);
    case DType::kBF16:
      return ConvertTyped<float, uint16_t>(src, dst, count, FloatToBf16);
    case DType::kI8:
      return ConvertTyped<int64_t, int8_t>(src, dst, count, FromI64<int8_t>);
    case DType::kI16:
      return ConvertTyped<int64_t, int16_t>(src, dst, count, FromI64<int16_t>);
    case DType::kI32:
      return ConvertTyped<int64_t, int32_t>(src, dst, count, FromI64<int32_t>);
    case DType::kU8:
      return ConvertTyped<int64_t, uint8_t>(src, dst, count, FromI64<uint8_t>);
    default:  // f32, f64, i64: never narrowed (WireDType is the dtype)
      return;
  }
}

}  // namespace

DType WireDType(DType dtype, ReduceOp op) {
  if (dtype == DType::kF16 || dtype == DType::kBF16) return DType::kF32;
  if (op == ReduceOp::kMean && !IsFloatingPoint(dtype)) return DType::kI64;
  return dtype;
}

ReduceOp WireCombineOp(ReduceOp op) { return op == ReduceOp::kMean ? ReduceOp::kSum : op; }

void ReduceToWire(DType dtype, ReduceOp op, absl::Span<const std::byte* const> inputs,
                  std::byte* wire, int64_t count) {
  const DType wire_dtype = WireDType(dtype, op);
  const ReduceOp combine = WireCombineOp(op);
  if (wire_dtype == dtype) {
    std::byte* outputs[1] = {wire};
    ReduceInto(dtype, combine, inputs, outputs, count);
    return;
  }
  const int64_t elem = DTypeSize(dtype);
  const int64_t wire_elem = DTypeSize(wire_dtype);
  alignas(8) std::byte widened[kStep * 8];
  for (int64_t base = 0; base < count; base += kStep) {
    const int64_t len = count - base < kStep ? count - base : kStep;
    std::byte* acc = wire + base * wire_elem;
    Widen(dtype, inputs[0] + base * elem, acc, len);
    for (size_t j = 1; j < inputs.size(); ++j) {
      Widen(dtype, inputs[j] + base * elem, widened, len);
      const std::byte* pair[2] = {acc, widened};
      std::byte* out[1] = {acc};
      ReduceInto(wire_dtype, combine, pair, out, len);
    }
  }
}

void FinishFromWire(DType dtype, ReduceOp op, int64_t ranks, std::byte* wire, std::byte* out,
                    int64_t count) {
  const DType wire_dtype = WireDType(dtype, op);
  if (op == ReduceOp::kMean) DivideInPlace(wire_dtype, wire, count, ranks);
  if (wire_dtype != dtype) {
    Narrow(dtype, wire, out, count);
  } else if (out != wire) {
    std::memcpy(out, wire, static_cast<size_t>(count * DTypeSize(dtype)));
  }
}

}  // namespace placement::server
