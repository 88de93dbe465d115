#include "client/src/parallel_copy.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22  // Linux 5.14
#endif

namespace placement::client {
namespace {

// Runs fn(lo, hi) over [0, n) cut into page-aligned slices of at least 8 MiB,
// on up to min(hardware threads, 8) threads, the caller's included.
template <typename Fn>
void ForSlices(size_t n, const Fn& fn) {
  constexpr size_t kMinSlice = size_t{8} << 20;
  const size_t hardware = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t slices = std::min({hardware, size_t{8}, n / kMinSlice});
  if (slices < 2) {
    fn(size_t{0}, n);
    return;
  }
  const size_t step = (n / slices + 4095) / 4096 * 4096;
  std::vector<std::thread> threads;
  for (size_t i = 1; i < slices; ++i) {
    const size_t lo = std::min(n, i * step);
    const size_t hi = i + 1 == slices ? n : std::min(n, lo + step);
    if (lo < hi) threads.emplace_back([&fn, lo, hi] { fn(lo, hi); });
  }
  fn(size_t{0}, std::min(n, step));
  for (std::thread& t : threads) t.join();
}

}  // namespace

void ParallelCopy(void* dst, const void* src, size_t n) {
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  ForSlices(n, [out, in](size_t lo, size_t hi) { std::memcpy(out + lo, in + lo, hi - lo); });
}

void PopulateMapping(void* base, size_t n) {
  auto* at = static_cast<char*>(base);
  ForSlices(n, [at](size_t lo, size_t hi) { (void)madvise(at + lo, hi - lo, MADV_POPULATE_READ); });
}

}  // namespace placement::client
