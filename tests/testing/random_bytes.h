// RandomBytes: `n` reproducible pseudo-random bytes from `seed` (0/1 bytes
// when `boolean`, a valid bool tensor), for tests that upload and compare.
#ifndef PLACEMENT_TESTS_TESTING_RANDOM_BYTES_H_
#define PLACEMENT_TESTS_TESTING_RANDOM_BYTES_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace placement::testing {

inline std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, bool boolean = false) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> out(n);
  size_t i = 0;
  for (; !boolean && i + 4 <= n; i += 4) {
    const uint32_t v = rng();
    std::memcpy(out.data() + i, &v, 4);
  }
  for (; i < n; ++i) {
    out[i] = boolean ? static_cast<uint8_t>(rng() & 1) : static_cast<uint8_t>(rng());
  }
  return out;
}

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_RANDOM_BYTES_H_
