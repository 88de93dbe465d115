// Helpers shared by the collective tests: typed encoding of float64 values
// into a dtype's bytes and back, and a float64 reference for every
// reduction with the documented integer rules (wrap-around SUM / PROD,
// MEAN truncating toward zero). Header-only; thread-compatible.
#ifndef PLACEMENT_TESTS_SERVER_COLLECTIVE_COLLECTIVE_TEST_UTIL_H_
#define PLACEMENT_TESTS_SERVER_COLLECTIVE_COLLECTIVE_TEST_UTIL_H_

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/reduce_op.h"
#include "server/collective/collective_engine.h"
#include "server/collective/kernels/half_float.h"

namespace placement::server::testing {

// Appends the next rank of a group whose every rank is in this process:
// rank = the ranks already listed, group device = recv's device.
inline void AddRank(CollectiveItem& item, const DeviceBuffer* send, DeviceBuffer* recv) {
  item.group.push_back(recv->device_id());
  item.local.push_back(RankBuffers{static_cast<int32_t>(item.local.size()), send, recv});
}

// Replaces the ranks of `item` by send[r] / recv[r], r = 0, 1, ...
inline void SetRanks(CollectiveItem& item, const std::vector<const DeviceBuffer*>& send,
                     const std::vector<DeviceBuffer*>& recv) {
  item.group.clear();
  item.local.clear();
  for (size_t r = 0; r < recv.size(); ++r) AddRank(item, send[r], recv[r]);
}

// For a cross-process engine: `process` of `processes` contributes k =
// send.size() ranks, process * k + j; the group has processes * k ranks
// (rank q * k + j's device is q, standing in for a device of process q).
inline void SetProcessRanks(CollectiveItem& item, int process, int processes,
                            const std::vector<const DeviceBuffer*>& send,
                            const std::vector<DeviceBuffer*>& recv) {
  const int k = static_cast<int>(recv.size());
  item.group.clear();
  item.local.clear();
  for (int q = 0; q < processes; ++q) {
    for (int j = 0; j < k; ++j) item.group.push_back(q);
  }
  for (int j = 0; j < k; ++j) item.local.push_back(RankBuffers{process * k + j, send[j], recv[j]});
}

inline constexpr DType kReducibleDTypes[] = {DType::kF32,  DType::kF64, DType::kF16,
                                             DType::kBF16, DType::kI8,  DType::kI16,
                                             DType::kI32,  DType::kI64, DType::kU8};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax,
                                       ReduceOp::kMin, ReduceOp::kProd};

template <typename T>
void PutAs(double v, std::byte* out) {
  T x = static_cast<T>(v);
  std::memcpy(out, &x, sizeof(T));
}

template <typename T>
double GetAs(const std::byte* in) {
  T x;
  std::memcpy(&x, in, sizeof(T));
  return static_cast<double>(x);
}

// REQUIRES: v is representable (tests pick values the dtype holds exactly).
inline void EncodeOne(DType dtype, double v, std::byte* out) {
  switch (dtype) {
    case DType::kF32:
      return PutAs<float>(v, out);
    case DType::kF64:
      return PutAs<double>(v, out);
    case DType::kF16:
      return PutAs<uint16_t>(FloatToF16(static_cast<float>(v)), out);
    case DType::kBF16:
      return PutAs<uint16_t>(FloatToBf16(static_cast<float>(v)), out);
    case DType::kI8:
      return PutAs<int8_t>(v, out);
    case DType::kI16:
      return PutAs<int16_t>(v, out);
    case DType::kI32:
      return PutAs<int32_t>(v, out);
    case DType::kI64:
      return PutAs<int64_t>(v, out);
    case DType::kU8:
      return PutAs<uint8_t>(v, out);
    case DType::kBool:
      return PutAs<uint8_t>(v != 0, out);
  }
}

inline double DecodeOne(DType dtype, const std::byte* in) {
  switch (dtype) {
    case DType::kF32:
      return GetAs<float>(in);
    case DType::kF64:
      return GetAs<double>(in);
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      return F16ToFloat(h);
    }
    case DType::kBF16: {
      uint16_t h;
      std::memcpy(&h, in, 2);
      return Bf16ToFloat(h);
    }
    case DType::kI8:
      return GetAs<int8_t>(in);
    case DType::kI16:
      return GetAs<int16_t>(in);
    case DType::kI32:
      return GetAs<int32_t>(in);
    case DType::kI64:
      return GetAs<int64_t>(in);
    case DType::kU8:
      return GetAs<uint8_t>(in);
    case DType::kBool:
      return GetAs<uint8_t>(in);
  }
  return 0;
}

inline std::vector<std::byte> Encode(DType dtype, const std::vector<double>& values) {
  const int64_t elem = DTypeSize(dtype);
  std::vector<std::byte> out(values.size() * elem);
  for (size_t i = 0; i < values.size(); ++i) EncodeOne(dtype, values[i], out.data() + i * elem);
  return out;
}

inline std::vector<double> Decode(DType dtype, const void* data, int64_t count) {
  const int64_t elem = DTypeSize(dtype);
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i) {
    out[i] = DecodeOne(dtype, static_cast<const std::byte*>(data) + i * elem);
  }
  return out;
}

// Values every dtype holds exactly and that keep PROD of `ranks` values in
// range for floats: small integers for integer dtypes (negative ones for
// signed types), multiples of 1/8 in [0.5, 1.5] for floats.
inline std::vector<double> TestValues(DType dtype, int64_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<double> out(count);
  for (int64_t i = 0; i < count; ++i) {
    switch (dtype) {
      case DType::kF32:
      case DType::kF64:
      case DType::kF16:
      case DType::kBF16:
        out[i] = 0.5 + static_cast<double>(rng() % 9) / 8.0;
        break;
      case DType::kU8:
        out[i] = static_cast<double>(rng() % 256);
        break;
      default:
        out[i] = static_cast<double>(static_cast<int>(rng() % 201) - 100);
        break;
    }
  }
  return out;
}

// Wraps an exact integer into the dtype's range (two's complement).
inline double WrapInt(DType dtype, long double v) {
  const int bits = static_cast<int>(DTypeSize(dtype)) * 8;
  __int128 x = static_cast<__int128>(v);
  if (bits < 64) {
    const __int128 mod = static_cast<__int128>(1) << bits;
    x %= mod;
    if (x < 0) x += mod;
    if (dtype != DType::kU8 && x >= mod / 2) x -= mod;
    return static_cast<double>(x);
  }
  return static_cast<double>(static_cast<int64_t>(static_cast<uint64_t>(x)));
}

// The float64 reference of `op` over `values` (one per rank) for `dtype`.
// Integers are computed exactly: SUM / MEAN in 128 bits, PROD modulo 2^64,
// then wrapped into the dtype (MEAN truncates toward zero).
inline double Reference(DType dtype, ReduceOp op, const std::vector<double>& values) {
  if (!IsFloatingPoint(dtype)) {
    __int128 sum = 0;
    uint64_t prod = 1;
    int64_t hi = static_cast<int64_t>(values[0]), lo = hi;
    for (double v : values) {
      const int64_t x = static_cast<int64_t>(v);
      sum += x;
      prod *= static_cast<uint64_t>(x);
      hi = std::max(hi, x);
      lo = std::min(lo, x);
    }
    switch (op) {
      case ReduceOp::kSum:
        return WrapInt(dtype, static_cast<long double>(sum));
      case ReduceOp::kMean:
        return static_cast<double>(sum / static_cast<__int128>(values.size()));
      case ReduceOp::kProd:
        if (DTypeSize(dtype) == 8) return static_cast<double>(static_cast<int64_t>(prod));
        return WrapInt(dtype, static_cast<long double>(prod & 0xffffffffull));
      case ReduceOp::kMax:
        return static_cast<double>(hi);
      case ReduceOp::kMin:
        return static_cast<double>(lo);
    }
  }
  long double acc = values[0];
  for (size_t j = 1; j < values.size(); ++j) {
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kMean:
        acc += values[j];
        break;
      case ReduceOp::kProd:
        acc *= values[j];
        break;
      case ReduceOp::kMax:
        acc = std::max<long double>(acc, values[j]);
        break;
      case ReduceOp::kMin:
        acc = std::min<long double>(acc, values[j]);
        break;
    }
  }
  if (op == ReduceOp::kMean) acc /= values.size();
  return static_cast<double>(acc);
}

// Relative tolerance of a result narrowed once to `dtype` (0: exact).
inline double Tolerance(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 1e-6;
    case DType::kF64:
      return 1e-14;
    case DType::kF16:
      return 1e-3;
    case DType::kBF16:
      return 8e-3;
    default:
      return 0;
  }
}

inline bool Near(DType dtype, double got, double want) {
  const double tol = Tolerance(dtype);
  if (tol == 0) return got == want;
  return std::fabs(got - want) <= tol * std::max(1.0, std::fabs(want));
}

}  // namespace placement::server::testing

#endif  // PLACEMENT_TESTS_SERVER_COLLECTIVE_COLLECTIVE_TEST_UTIL_H_
