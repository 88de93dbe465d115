// IEEE binary16 (f16) and bfloat16 (bf16) <-> f32 conversion for the CPU
// reduction kernels, which accumulate 16-bit floats in f32. Narrowing rounds
// to nearest, ties to even; NaN stays NaN (quiet), overflow becomes infinity,
// f16 subnormals are produced and read exactly.
//
// Pure inline functions; thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_KERNELS_HALF_FLOAT_H_
#define PLACEMENT_SERVER_COLLECTIVE_KERNELS_HALF_FLOAT_H_

#include <cstdint>
#include <cstring>

namespace placement::server {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float Bf16ToFloat(uint16_t h) { return BitsToFloat(static_cast<uint32_t>(h) << 16); }

inline uint16_t FloatToBf16(float f) {
  uint32_t u = FloatBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float F16ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    // Zero or subnormal: mant * 2^-24, exact in f32.
    const float magnitude = static_cast<float>(mant) * 5.9604644775390625e-8f;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exp == 31) return BitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  return BitsToFloat(sign | ((exp + 112u) << 23) | (mant << 13));
}

inline uint16_t FloatToF16(float f) {
  uint32_t x = FloatBits(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / inf
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to infinity
  if (x < 0x38800000u) {                        // below 2^-14: subnormal or zero
    if (x <= 0x33000000u) return sign;          // <= 2^-25 rounds to zero
    const uint32_t e = x >> 23;
    const uint32_t m = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // 14..24
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return static_cast<uint16_t>(sign | q);
  }
  uint32_t h = (((x >> 23) - 112u) << 10) | ((x & 0x7fffffu) >> 13);
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_KERNELS_HALF_FLOAT_H_
