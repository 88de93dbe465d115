#include "server/collective/kernels/reduce_kernels.h"

#include <cstring>
#include <type_traits>

#include "server/collective/kernels/half_float.h"

namespace placement::server {
namespace {

// Elements per sub-block: the accumulator (at most 16 KiB for 128-bit
// accumulators) stays in L1 while the inputs stream through.
constexpr int64_t kSubBlock = 1024;

// Storage type <-> accumulator type conversion.
struct F16Tag {};
struct Bf16Tag {};

template <typename Storage, typename Acc>
struct Codec {
  static Acc Load(const Storage& v) { return static_cast<Acc>(v); }
  static Storage Store(const Acc& a) { return static_cast<Storage>(a); }
};

// f16 / bf16 travel as uint16_t bit patterns; the codec picks the format.
template <typename Format>
struct HalfCodec;
template <>
struct HalfCodec<F16Tag> {
  static float Load(uint16_t v) { return F16ToFloat(v); }
  static uint16_t Store(float a) { return FloatToF16(a); }
};
template <>
struct HalfCodec<Bf16Tag> {
  static float Load(uint16_t v) { return Bf16ToFloat(v); }
  static uint16_t Store(float a) { return FloatToBf16(a); }
};

template <typename Acc, ReduceOp kOp>
inline Acc Combine(Acc a, Acc b) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kMean) {
    return a + b;
  } else if constexpr (kOp == ReduceOp::kProd) {
    return a * b;
  } else if constexpr (std::is_floating_point_v<Acc>) {
    // NaN-propagating max / min.
    if constexpr (kOp == ReduceOp::kMax) return (a > b || a != a) ? a : b;
    return (a < b || a != a) ? a : b;
  } else {
    if constexpr (kOp == ReduceOp::kMax) return a > b ? a : b;
    return a < b ? a : b;
  }
}

// out[k] = a[k] (op) b[k] in one pass, where the element type is its own
// accumulator: Gloo's pairwise reduce, the commonest call, which the general
// path below would run in three (load, combine, copy out). `out` may be `a`
// or `b` (each element is read before it is written); the loops are split so
// the compiler sees which, and vectorizes each.
template <typename T, ReduceOp kOp>
void CombinePair(const T* a, const T* b, T* out, int64_t count) {
  if (out == a) {
    for (int64_t k = 0; k < count; ++k) out[k] = Combine<T, kOp>(out[k], b[k]);
  } else if (out == b) {
    for (int64_t k = 0; k < count; ++k) out[k] = Combine<T, kOp>(a[k], out[k]);
  } else {
    const T* __restrict x = a;
    const T* __restrict y = b;
    T* __restrict z = out;
    for (int64_t k = 0; k < count; ++k) z[k] = Combine<T, kOp>(x[k], y[k]);
  }
}

// Storage: element type in memory; Acc: accumulator; Conv: Load/Store.
template <typename Storage, typename Acc, typename Conv, ReduceOp kOp>
void ReduceTyped(absl::Span<const std::byte* const> inputs, absl::Span<std::byte* const> outputs,
                 int64_t count) {
  const size_t n = inputs.size();
  if constexpr (std::is_same_v<Storage, Acc>) {
    // One input: the reduction is the input (a mean of one divides by one,
    // exactly): copied to each output that is not the input itself.
    if (n == 1) {
      for (std::byte* out : outputs) {
        if (out != inputs[0])
          std::memcpy(out, inputs[0], static_cast<size_t>(count) * sizeof(Storage));
      }
      return;
    }
  }
  if constexpr (std::is_same_v<Storage, Acc> && kOp != ReduceOp::kMean) {
    if (n == 2 && outputs.size() == 1) {
      return CombinePair<Storage, kOp>(reinterpret_cast<const Storage*>(inputs[0]),
                                       reinterpret_cast<const Storage*>(inputs[1]),
                                       reinterpret_cast<Storage*>(outputs[0]), count);
    }
  }
  Acc acc[kSubBlock];
  Storage narrowed[kSubBlock];
  for (int64_t base = 0; base < count; base += kSubBlock) {
    const int64_t len = count - base < kSubBlock ? count - base : kSubBlock;
    const Storage* first = reinterpret_cast<const Storage*>(inputs[0]) + base;
    for (int64_t k = 0; k < len; ++k) acc[k] = Conv::Load(first[k]);
    for (size_t j = 1; j < n; ++j) {
      const Storage* in = reinterpret_cast<const Storage*>(inputs[j]) + base;
      for (int64_t k = 0; k < len; ++k) acc[k] = Combine<Acc, kOp>(acc[k], Conv::Load(in[k]));
    }
    const Storage* result = narrowed;
    if constexpr (kOp == ReduceOp::kMean) {
      const Acc divisor = static_cast<Acc>(n);
      for (int64_t k = 0; k < len; ++k) narrowed[k] = Conv::Store(acc[k] / divisor);
    } else if constexpr (std::is_same_v<Storage, Acc>) {
      result = acc;
    } else {
      for (int64_t k = 0; k < len; ++k) narrowed[k] = Conv::Store(acc[k]);
    }
    const size_t bytes = static_cast<size_t>(len) * sizeof(Storage);
    for (std::byte* out : outputs) {
      std::memcpy(reinterpret_cast<Storage*>(out) + base, result, bytes);
    }
  }
}

template <typename Storage, typename Acc, typename Conv>
void DispatchOp(ReduceOp op, absl::Span<const std::byte* const> inputs,
                absl::Span<std::byte* const> outputs, int64_t count) {
  switch (op) {
    case ReduceOp::kSum:
      return ReduceTyped<Storage, Acc, Conv, ReduceOp::kSum>(inputs, outputs, count);
    case ReduceOp::kMean:
      return ReduceTyped<Storage, Acc, Conv, ReduceOp::kMean>(inputs, outputs, count);
    case ReduceOp::kMax:
      return ReduceTyped<Storage, Acc, Conv, ReduceOp::kMax>(inputs, outputs, count);
    case ReduceOp::kMin:
      return ReduceTyped<Storage, Acc, Conv, ReduceOp::kMin>(inputs, outputs, count);
    case ReduceOp::kProd:
      return ReduceTyped<Storage, Acc, Conv, ReduceOp::kProd>(inputs, outputs, count);
  }
}

// Integers: wrap-around SUM / PROD in an unsigned type at least as wide as
// int (so no promotion to signed int can overflow), exact MEAN in a wider
// signed type, MAX / MIN in the type itself.
template <typename T, typename Wide>
void DispatchInt(ReduceOp op, absl::Span<const std::byte* const> inputs,
                 absl::Span<std::byte* const> outputs, int64_t count) {
  using Wrap = std::conditional_t<(sizeof(T) <= 4), uint32_t, uint64_t>;
  switch (op) {
    case ReduceOp::kSum:
      return ReduceTyped<T, Wrap, Codec<T, Wrap>, ReduceOp::kSum>(inputs, outputs, count);
    case ReduceOp::kProd:
      return ReduceTyped<T, Wrap, Codec<T, Wrap>, ReduceOp::kProd>(inputs, outputs, count);
    case ReduceOp::kMean:
      return ReduceTyped<T, Wide, Codec<T, Wide>, ReduceOp::kMean>(inputs, outputs, count);
    case ReduceOp::kMax:
      return ReduceTyped<T, T, Codec<T, T>, ReduceOp::kMax>(inputs, outputs, count);
    case ReduceOp::kMin:
      return ReduceTyped<T, T, Codec<T, T>, ReduceOp::kMin>(inputs, outputs, count);
  }
}

template <typename Storage, typename Acc, typename Conv>
void DivideTyped(std::byte* data, int64_t count, int64_t divisor) {
  Storage* values = reinterpret_cast<Storage*>(data);
  const Acc d = static_cast<Acc>(divisor);
  for (int64_t k = 0; k < count; ++k) values[k] = Conv::Store(Conv::Load(values[k]) / d);
}

}  // namespace

void DivideInPlace(DType dtype, std::byte* data, int64_t count, int64_t divisor) {
  switch (dtype) {
    case DType::kF32:
      return DivideTyped<float, float, Codec<float, float>>(data, count, divisor);
    case DType::kF64:
      return DivideTyped<double, double, Codec<double, double>>(data, count, divisor);
    case DType::kF16:
      return DivideTyped<uint16_t, float, HalfCodec<F16Tag>>(data, count, divisor);
    case DType::kBF16:
      return DivideTyped<uint16_t, float, HalfCodec<Bf16Tag>>(data, count, divisor);
    case DType::kI8:
      return DivideTyped<int8_t, int64_t, Codec<int8_t, int64_t>>(data, count, divisor);
    case DType::kI16:
      return DivideTyped<int16_t, int64_t, Codec<int16_t, int64_t>>(data, count, divisor);
    case DType::kI32:
      return DivideTyped<int32_t, int64_t, Codec<int32_t, int64_t>>(data, count, divisor);
    case DType::kI64:
      return DivideTyped<int64_t, int64_t, Codec<int64_t, int64_t>>(data, count, divisor);
    case DType::kU8:
      return DivideTyped<uint8_t, int64_t, Codec<uint8_t, int64_t>>(data, count, divisor);
    case DType::kBool:
      return;
  }
}

bool IsReducible(DType dtype) { return dtype != DType::kBool; }

void ReduceInto(DType dtype, ReduceOp op, absl::Span<const std::byte* const> inputs,
                absl::Span<std::byte* const> outputs, int64_t count) {
  if (count <= 0 || inputs.empty()) return;
  switch (dtype) {
    case DType::kF32:
      return DispatchOp<float, float, Codec<float, float>>(op, inputs, outputs, count);
    case DType::kF64:
      return DispatchOp<double, double, Codec<double, double>>(op, inputs, outputs, count);
    case DType::kF16:
      return DispatchOp<uint16_t, float, HalfCodec<F16Tag>>(op, inputs, outputs, count);
    case DType::kBF16:
      return DispatchOp<uint16_t, float, HalfCodec<Bf16Tag>>(op, inputs, outputs, count);
    case DType::kI8:
      return DispatchInt<int8_t, int64_t>(op, inputs, outputs, count);
    case DType::kI16:
      return DispatchInt<int16_t, int64_t>(op, inputs, outputs, count);
    case DType::kI32:
      return DispatchInt<int32_t, int64_t>(op, inputs, outputs, count);
    case DType::kI64:
      return DispatchInt<int64_t, __int128>(op, inputs, outputs, count);
    case DType::kU8:
      return DispatchInt<uint8_t, int64_t>(op, inputs, outputs, count);
    case DType::kBool:
      return;
  }
}

}  // namespace placement::server
