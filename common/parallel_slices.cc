#include "common/parallel_slices.h"

#include <algorithm>
#include <thread>
#include <vector>

namespace placement {

void ForEachSlice(size_t n, const SliceOptions& options,
                  absl::FunctionRef<void(size_t begin, size_t end)> fn) {
  const size_t hardware = std::max<size_t>(1, std::thread::hardware_concurrency());
  const size_t slices =
      std::min({hardware, options.max_threads, n / std::max<size_t>(1, options.min_slice_bytes)});
  if (slices < 2) {
    fn(0, n);
    return;
  }
  const size_t align = std::max<size_t>(1, options.align_bytes);
  const size_t step = (n / slices + align - 1) / align * align;
  std::vector<std::thread> threads;
  threads.reserve(slices - 1);
  for (size_t i = 1; i < slices; ++i) {
    const size_t begin = std::min(n, i * step);
    const size_t end = i + 1 == slices ? n : std::min(n, begin + step);
    if (begin < end) threads.emplace_back([fn, begin, end] { fn(begin, end); });
  }
  fn(0, std::min(n, step));
  for (std::thread& t : threads) t.join();
}

}  // namespace placement
