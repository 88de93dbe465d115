#include "client/src/parallel_copy.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace placement::client {

void ParallelCopy(void* dst, const void* src, size_t n) {
  constexpr size_t kMinSlice = size_t{8} << 20;
  const size_t hardware = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t slices = std::min({hardware, size_t{8}, n / kMinSlice});
  if (slices < 2) {
    std::memcpy(dst, src, n);
    return;
  }
  const size_t step = (n / slices + 4095) / 4096 * 4096;
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  std::vector<std::thread> threads;
  for (size_t i = 1; i < slices; ++i) {
    const size_t lo = std::min(n, i * step);
    const size_t hi = i + 1 == slices ? n : std::min(n, lo + step);
    if (lo < hi) threads.emplace_back([=] { std::memcpy(out + lo, in + lo, hi - lo); });
  }
  std::memcpy(out, in, std::min(n, step));
  for (std::thread& t : threads) t.join();
}

}  // namespace placement::client
