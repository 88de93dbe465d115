#include "server/tensor/box_cursor.h"

#include <random>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

// The buffer offset of every region byte, in stream order, by brute force.
std::vector<int64_t> Expected(const Box& outer, const Box& region, int64_t elem) {
  std::vector<int64_t> out;
  const size_t rank = outer.size();
  std::vector<int64_t> idx(rank);
  for (size_t d = 0; d < rank; ++d) idx[d] = region[d].begin;
  const int64_t n = BoxNumElements(region);
  for (int64_t e = 0; e < n; ++e) {
    int64_t flat = 0;
    for (size_t d = 0; d < rank; ++d) flat = flat * outer[d].size() + (idx[d] - outer[d].begin);
    for (int64_t b = 0; b < elem; ++b) out.push_back(flat * elem + b);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < region[d].end) break;
      idx[d] = region[d].begin;
    }
  }
  return out;
}

std::vector<int64_t> Walk(const Box& outer, const Box& region, int64_t elem, int64_t step,
                          bool source) {
  BoxCursor cursor(outer, region, elem);
  std::vector<int64_t> out;
  int64_t stream = 0;
  while (!cursor.done()) {
    std::vector<ByteRun> runs;
    const int64_t got = cursor.Next(step, source, &runs);
    EXPECT_GT(got, 0);
    int64_t covered = 0;
    for (const ByteRun& r : runs) {
      const int64_t buffer = source ? r.src_offset : r.dst_offset;
      const int64_t chunk = source ? r.dst_offset : r.src_offset;
      EXPECT_EQ(chunk, covered);
      for (int64_t b = 0; b < r.length; ++b) out.push_back(buffer + b);
      covered += r.length;
    }
    EXPECT_EQ(covered, got);
    stream += got;
  }
  EXPECT_EQ(stream, cursor.total_bytes());
  return out;
}

TEST(BoxCursorTest, WorkedExample) {
  Box outer = {{0, 4}, {0, 6}};
  Box region = {{1, 3}, {2, 4}};
  BoxCursor cursor(outer, region, 4);
  std::vector<ByteRun> runs;
  EXPECT_EQ(cursor.Next(1 << 20, true, &runs), 16);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].src_offset, 32);
  EXPECT_EQ(runs[0].length, 8);
  EXPECT_EQ(runs[1].src_offset, 56);
  EXPECT_EQ(runs[1].dst_offset, 8);
}

TEST(BoxCursorTest, FullRowsMergeIntoOneRun) {
  Box outer = {{2, 6}, {0, 3}, {0, 5}};
  Box region = {{3, 5}, {0, 3}, {0, 5}};
  BoxCursor cursor(outer, region, 2);
  std::vector<ByteRun> runs;
  EXPECT_EQ(cursor.Next(1 << 20, false, &runs), 60);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].dst_offset, 30);
}

TEST(BoxCursorTest, ScalarAndEmpty) {
  BoxCursor scalar({}, {}, 8);
  std::vector<ByteRun> runs;
  EXPECT_EQ(scalar.Next(100, true, &runs), 8);
  EXPECT_TRUE(scalar.done());
  BoxCursor empty({{0, 4}}, {{2, 2}}, 4);
  EXPECT_TRUE(empty.done());
}

TEST(BoxCursorTest, RandomBoxesAnyStepMatchBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const int rank = 1 + static_cast<int>(rng() % 4);
    Box outer, region;
    for (int d = 0; d < rank; ++d) {
      const int64_t lo = rng() % 3, size = 1 + rng() % 5;
      outer.push_back({lo, lo + size});
      const int64_t b = lo + rng() % size;
      const int64_t e = b + 1 + rng() % (lo + size - b);
      region.push_back({b, std::min(e, lo + size)});
    }
    const int64_t elem = int64_t{1} << (rng() % 4);
    const std::vector<int64_t> expected = Expected(outer, region, elem);
    for (int64_t step : {int64_t{1}, int64_t{3}, elem * 5, int64_t{1} << 20}) {
      for (bool source : {true, false}) {
        EXPECT_EQ(Walk(outer, region, elem, step, source), expected)
            << BoxToString(outer) << " " << BoxToString(region) << " step " << step;
      }
    }
  }
}

}  // namespace
}  // namespace placement::server
