#include "common/parallel_slices.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace placement {
namespace {

std::vector<std::pair<size_t, size_t>> Slices(size_t n, const SliceOptions& options) {
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> out;
  ForEachSlice(n, options, [&](size_t begin, size_t end) {
    std::lock_guard<std::mutex> lock(mu);
    out.emplace_back(begin, end);
  });
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ParallelSlicesTest, SlicesCoverTheRangeOnceAlignedAndBounded) {
  const SliceOptions options{.min_slice_bytes = 100, .align_bytes = 64, .max_threads = 3};
  const size_t n = 1000;
  const auto slices = Slices(n, options);
  const size_t expected =
      std::min<size_t>({3, std::max(1u, std::thread::hardware_concurrency()), n / 100});
  ASSERT_EQ(slices.size(), expected);
  size_t at = 0;
  for (const auto& [begin, end] : slices) {
    EXPECT_EQ(begin, at);
    EXPECT_LT(begin, end);
    if (end != n) EXPECT_EQ(end % 64, 0u);
    at = end;
  }
  EXPECT_EQ(at, n);
}

TEST(ParallelSlicesTest, SmallWorkRunsOnceOnTheCallersThread) {
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::thread::id> ran;
  ForEachSlice(150, {.min_slice_bytes = 100}, [&](size_t begin, size_t end) {
    EXPECT_EQ(begin, 0u);
    EXPECT_EQ(end, 150u);
    ran.push_back(std::this_thread::get_id());
  });
  ASSERT_EQ(ran.size(), 1u);
  EXPECT_EQ(ran[0], caller);
  EXPECT_EQ(Slices(0, {}).size(), 1u);  // an empty range: one empty call
}

}  // namespace
}  // namespace placement
