#include "server/tensor/spread_copy.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace placement::server {

absl::Status SpreadOverThreads(int64_t begin, int64_t end,
                               absl::FunctionRef<absl::Status(int64_t lo, int64_t hi)> fn) {
  const int64_t length = end - begin;
  const int64_t hardware = std::max<int64_t>(1, std::thread::hardware_concurrency());
  const int64_t slices = std::max<int64_t>(
      1, std::min({hardware, int64_t{kSpreadMaxThreads}, length / kSpreadMinSliceBytes}));
  if (slices == 1) return fn(begin, end);
  // Slice boundaries on 4 KiB multiples keep each thread on its own pages.
  const int64_t step = ((length / slices) + 4095) / 4096 * 4096;
  std::vector<absl::Status> results(static_cast<size_t>(slices));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(slices - 1));
  for (int64_t i = 1; i < slices; ++i) {
    const int64_t lo = std::min(end, begin + i * step);
    const int64_t hi = i + 1 == slices ? end : std::min(end, lo + step);
    threads.emplace_back([&, i, lo, hi] {
      if (lo < hi) results[static_cast<size_t>(i)] = fn(lo, hi);
    });
  }
  results[0] = fn(begin, std::min(end, begin + step));
  for (std::thread& t : threads) t.join();
  for (const absl::Status& status : results) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

}  // namespace placement::server
