#include "common/region.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace placement {
namespace {

struct ByteRun {
  int64_t a;  // src / global byte offset
  int64_t b;  // dst / box byte offset
  int64_t length;
  bool operator==(const ByteRun&) const = default;
  friend std::ostream& operator<<(std::ostream& os, const ByteRun& r) {
    return os << "{" << r.a << ", " << r.b << ", " << r.length << "}";
  }
};

std::vector<ByteRun> CopyRuns(const Box& region, const Box& src, const Box& dst,
                              int64_t elem_size) {
  std::vector<ByteRun> runs;
  ForEachCopyRun(region, src, dst, elem_size, [&](int64_t s, int64_t d, int64_t n) {
    runs.push_back({s, d, n});
  });
  return runs;
}

std::vector<ByteRun> RangeRuns(const Shape& shape, const Box& box, int64_t elem_size, int64_t begin,
                               int64_t end) {
  std::vector<ByteRun> runs;
  ForEachRunInByteRange(shape, box, elem_size, begin, end, [&](int64_t g, int64_t b, int64_t n) {
    runs.push_back({g, b, n});
  });
  return runs;
}

// Row-major linear index of `coords` inside `box` (coords in global terms).
int64_t OffsetIn(const Box& box, const std::vector<int64_t>& coords) {
  int64_t offset = 0;
  for (size_t d = 0; d < box.size(); ++d)
    offset = offset * box[d].size() + (coords[d] - box[d].begin);
  return offset;
}

// Calls fn(coords) for every element of `box` in row-major order.
template <typename Fn>
void ForEachElement(const Box& box, Fn fn) {
  if (BoxNumElements(box) == 0) return;
  std::vector<int64_t> coords(box.size());
  for (size_t d = 0; d < box.size(); ++d) coords[d] = box[d].begin;
  while (true) {
    fn(coords);
    int d = static_cast<int>(box.size()) - 1;
    for (; d >= 0; --d) {
      if (++coords[d] < box[d].end) break;
      coords[d] = box[d].begin;
    }
    if (d < 0) return;
  }
}

class Random {
 public:
  explicit Random(uint32_t seed) : rng_(seed) {}
  int64_t Uniform(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }
  Shape RandomShape(int max_rank, int64_t max_dim) {
    Shape shape(Uniform(0, max_rank));
    for (int64_t& d : shape) d = Uniform(1, max_dim);
    return shape;
  }
  // A random sub-box of `outer`; whole dimensions are likely, so runs coalesce.
  Box SubBox(const Box& outer, bool allow_empty = false) {
    Box box(outer.size());
    for (size_t d = 0; d < outer.size(); ++d) {
      if (Uniform(0, 2) == 0) {
        box[d] = outer[d];
        continue;
      }
      int64_t a = Uniform(outer[d].begin, outer[d].end);
      int64_t b = Uniform(outer[d].begin, outer[d].end);
      if (a > b) std::swap(a, b);
      if (a == b && !allow_empty) {
        if (b < outer[d].end) {
          ++b;
        } else {
          --a;
        }
      }
      box[d] = {a, b};
    }
    return box;
  }

 private:
  std::mt19937 rng_;
};

TEST(BoxTest, Basics) {
  EXPECT_EQ(BoxNumElements({}), 1);
  EXPECT_EQ(BoxNumElements({{2, 5}, {1, 3}}), 6);
  EXPECT_EQ(BoxNumElements({{2, 5}, {3, 3}}), 0);
  EXPECT_EQ(BoxShape({{2, 5}, {3, 3}}), (Shape{3, 0}));
  EXPECT_EQ(FullBox({}), Box{});
  EXPECT_EQ(FullBox({4, 0, 2}), (Box{{0, 4}, {0, 0}, {0, 2}}));
  EXPECT_EQ(BoxToString({{0, 4}, {2, 4}}), "[0:4, 2:4]");
  EXPECT_EQ(BoxToString({}), "[]");
  EXPECT_TRUE(BoxContains({{0, 4}, {0, 6}}, {{0, 4}, {2, 4}}));
  EXPECT_TRUE(BoxContains({{0, 4}}, {{4, 4}}));
  EXPECT_FALSE(BoxContains({{0, 4}}, {{3, 5}}));
  EXPECT_FALSE(BoxContains({{0, 4}}, {{0, 4}, {0, 1}}));
  EXPECT_TRUE(BoxContains({}, {}));
}

TEST(BoxTest, Intersect) {
  EXPECT_EQ(IntersectBoxes({{0, 4}, {0, 6}}, {{2, 8}, {3, 4}}), (Box{{2, 4}, {3, 4}}));
  EXPECT_EQ(IntersectBoxes({{0, 4}}, {{4, 8}}), std::nullopt);  // touching
  EXPECT_EQ(IntersectBoxes({{0, 4}, {0, 2}}, {{1, 2}, {5, 6}}), std::nullopt);
  EXPECT_EQ(IntersectBoxes({{0, 0}}, {{0, 4}}), std::nullopt);  // empty input
  std::optional<Box> scalar = IntersectBoxes({}, {});
  ASSERT_TRUE(scalar.has_value());
  EXPECT_TRUE(scalar->empty());
  EXPECT_EQ(IntersectBoxes({{1, 3}}, {{1, 3}}), (Box{{1, 3}}));
}

TEST(ForEachCopyRunTest, HeaderExample) {
  EXPECT_EQ(CopyRuns({{0, 2}, {2, 4}}, {{0, 4}, {0, 6}}, {{0, 4}, {2, 4}}, 4),
            (std::vector<ByteRun>{{8, 0, 8}, {32, 8, 8}}));
}

TEST(ForEachCopyRunTest, CoalescesWholeTrailingDimensions) {
  // Rows of a [4, 6] array, whole in every box: one run.
  EXPECT_EQ(CopyRuns({{1, 3}, {0, 6}}, {{0, 4}, {0, 6}}, {{1, 3}, {0, 6}}, 2),
            (std::vector<ByteRun>{{6 * 2, 0, 12 * 2}}));
  // Whole in src and region but not in dst: one run per row.
  EXPECT_EQ(CopyRuns({{0, 2}, {0, 2}}, {{0, 2}, {0, 2}}, {{0, 2}, {0, 4}}, 1),
            (std::vector<ByteRun>{{0, 0, 2}, {2, 4, 2}}));
  // Scalar and empty regions.
  EXPECT_EQ(CopyRuns({}, {}, {}, 8), (std::vector<ByteRun>{{0, 0, 8}}));
  EXPECT_TRUE(CopyRuns({{1, 1}, {0, 2}}, {{0, 2}, {0, 2}}, {{0, 2}, {0, 2}}, 4).empty());
  // A single outer row is one run even when the outer dim is not whole.
  EXPECT_EQ(
      CopyRuns({{2, 3}, {0, 4}, {0, 5}}, {{0, 4}, {0, 4}, {0, 5}}, {{2, 3}, {0, 4}, {0, 5}}, 1),
      (std::vector<ByteRun>{{40, 0, 20}}));
}

TEST(ForEachCopyRunTest, MatchesElementwiseCopyOnRandomBoxes) {
  Random random(42);
  for (int iter = 0; iter < 2000; ++iter) {
    const Shape shape = random.RandomShape(4, 6);
    const int64_t elem_size = std::vector<int64_t>{1, 2, 3, 4, 8}[random.Uniform(0, 4)];
    const Box global = FullBox(shape);
    const Box src = random.SubBox(global);
    const Box dst = random.SubBox(global);
    std::optional<Box> common = IntersectBoxes(src, dst);
    if (!common.has_value()) continue;
    const Box region = random.SubBox(*common, /*allow_empty=*/true);
    SCOPED_TRACE(BoxToString(region) + " from " + BoxToString(src) + " to " + BoxToString(dst));

    std::vector<uint8_t> src_buf(BoxNumElements(src) * elem_size);
    for (size_t i = 0; i < src_buf.size(); ++i) src_buf[i] = static_cast<uint8_t>(i * 7 + 1);
    std::vector<uint8_t> got(BoxNumElements(dst) * elem_size, 0), want = got;
    ForEachElement(region, [&](const std::vector<int64_t>& c) {
      const int64_t s = OffsetIn(src, c) * elem_size, d = OffsetIn(dst, c) * elem_size;
      for (int64_t b = 0; b < elem_size; ++b) want[d + b] = src_buf[s + b];
    });
    const std::vector<ByteRun> runs = CopyRuns(region, src, dst, elem_size);
    int64_t total = 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const ByteRun& r = runs[i];
      ASSERT_GT(r.length, 0);
      ASSERT_LE(r.a + r.length, static_cast<int64_t>(src_buf.size()));
      ASSERT_LE(r.b + r.length, static_cast<int64_t>(got.size()));
      std::copy(src_buf.begin() + r.a, src_buf.begin() + r.a + r.length, got.begin() + r.b);
      total += r.length;
      if (i > 0) {
        const ByteRun& p = runs[i - 1];
        ASSERT_LT(p.a, r.a);  // increasing order
        ASSERT_LT(p.b, r.b);
        // Maximal: the next run never continues the previous one in both buffers.
        ASSERT_FALSE(p.a + p.length == r.a && p.b + p.length == r.b);
      }
    }
    ASSERT_EQ(total, BoxNumElements(region) * elem_size);
    ASSERT_EQ(got, want);
  }
}

TEST(ForEachRunInByteRangeTest, HeaderExample) {
  EXPECT_EQ(RangeRuns({4, 6}, {{0, 4}, {2, 4}}, 4, 0, 96),
            (std::vector<ByteRun>{{8, 0, 8}, {32, 8, 8}, {56, 16, 8}, {80, 24, 8}}));
  // A chunk boundary splitting runs and elements.
  EXPECT_EQ(RangeRuns({4, 6}, {{0, 4}, {2, 4}}, 4, 10, 60),
            (std::vector<ByteRun>{{10, 2, 6}, {32, 8, 8}, {56, 16, 4}}));
  // Range outside the array, empty box, reversed range.
  EXPECT_TRUE(RangeRuns({4, 6}, {{0, 4}, {2, 4}}, 4, 96, 200).empty());
  EXPECT_TRUE(RangeRuns({4, 6}, {{0, 4}, {2, 2}}, 4, 0, 96).empty());
  EXPECT_TRUE(RangeRuns({4, 6}, {{0, 4}, {2, 4}}, 4, 50, 40).empty());
  EXPECT_EQ(RangeRuns({4, 6}, {{0, 4}, {2, 4}}, 4, -5, 12), (std::vector<ByteRun>{{8, 0, 4}}));
  // Scalar: one element.
  EXPECT_EQ(RangeRuns({}, {}, 4, 0, 100), (std::vector<ByteRun>{{0, 0, 4}}));
  EXPECT_EQ(RangeRuns({}, {}, 4, 1, 3), (std::vector<ByteRun>{{1, 1, 2}}));
  // Whole trailing dimensions coalesce; the box is one run.
  EXPECT_EQ(RangeRuns({4, 2, 3}, {{1, 3}, {0, 2}, {0, 3}}, 1, 0, 24),
            (std::vector<ByteRun>{{6, 0, 12}}));
}

TEST(ForEachRunInByteRangeTest, MatchesBruteForceOnRandomBoxesAndRanges) {
  Random random(7);
  for (int iter = 0; iter < 3000; ++iter) {
    const Shape shape = random.RandomShape(4, 5);
    const int64_t elem_size = std::vector<int64_t>{1, 2, 4, 8, 3}[random.Uniform(0, 4)];
    const Box box = random.SubBox(FullBox(shape), /*allow_empty=*/iter % 10 == 0);
    const int64_t total = NumElements(shape) * elem_size;
    int64_t begin = random.Uniform(-3, total + 3), end = random.Uniform(-3, total + 3);
    if (iter % 4 == 0) begin = 0, end = total;
    SCOPED_TRACE(ShapeToString(shape) + " box " + BoxToString(box) + " bytes [" +
                 std::to_string(begin) + ", " + std::to_string(end) + ") elem " +
                 std::to_string(elem_size));

    // Reference: global byte -> box byte for every byte of the box in range.
    std::vector<std::pair<int64_t, int64_t>> want;
    const Box global = FullBox(shape);
    ForEachElement(box, [&](const std::vector<int64_t>& c) {
      const int64_t g = OffsetIn(global, c) * elem_size, b = OffsetIn(box, c) * elem_size;
      for (int64_t i = 0; i < elem_size; ++i) {
        if (g + i >= begin && g + i < end) want.emplace_back(g + i, b + i);
      }
    });
    std::vector<std::pair<int64_t, int64_t>> got;
    const std::vector<ByteRun> runs = RangeRuns(shape, box, elem_size, begin, end);
    for (size_t i = 0; i < runs.size(); ++i) {
      const ByteRun& r = runs[i];
      ASSERT_GT(r.length, 0);
      for (int64_t k = 0; k < r.length; ++k) got.emplace_back(r.a + k, r.b + k);
      // Maximal: consecutive runs are consecutive in the box buffer, so they
      // must have a gap in the global array.
      if (i > 0) {
        ASSERT_LT(runs[i - 1].a + runs[i - 1].length, r.a);
      }
    }
    ASSERT_EQ(got, want);
  }
}

TEST(ForEachRunInByteRangeTest, ChunkedCallsCoverTheBoxOnce) {
  Random random(99);
  for (int iter = 0; iter < 200; ++iter) {
    const Shape shape = random.RandomShape(4, 6);
    const Box box = random.SubBox(FullBox(shape));
    const int64_t elem_size = 4;
    const int64_t total = NumElements(shape) * elem_size;
    std::vector<int> hits(BoxNumElements(box) * elem_size, 0);
    const int64_t chunk = random.Uniform(1, 64);
    for (int64_t begin = 0; begin < total; begin += chunk) {
      ForEachRunInByteRange(shape, box, elem_size, begin, begin + chunk,
                            [&](int64_t, int64_t b, int64_t n) {
                              for (int64_t k = 0; k < n; ++k) ++hits[b + k];
                            });
    }
    for (int h : hits) ASSERT_EQ(h, 1);
  }
}

// A 1 MiB window at the end of a tensor with 2^30 runs before it: the call
// must not walk the earlier runs.
TEST(ForEachRunInByteRangeTest, CostIndependentOfRunsBeforeBegin) {
  const Shape shape = {int64_t{1} << 30, 4};  // 16 GiB of f32
  const Box box = {{0, int64_t{1} << 30}, {1, 3}};
  const int64_t total = NumElements(shape) * 4;
  const auto start = std::chrono::steady_clock::now();
  int64_t calls = 0, bytes = 0;
  for (int rep = 0; rep < 16; ++rep) {
    const int64_t begin = total - (int64_t{1} << 20) * (rep + 1);
    ForEachRunInByteRange(shape, box, 4, begin, begin + (int64_t{1} << 20),
                          [&](int64_t g, int64_t b, int64_t n) {
                            ++calls;
                            bytes += n;
                            EXPECT_EQ((g - 4) / 16 * 8, b);
                          });
  }
  EXPECT_EQ(calls, 16 * (int64_t{1} << 16));
  EXPECT_EQ(bytes, 16 * (int64_t{1} << 19));
  // Walking 2^30 runs would take seconds; the real cost is ~1M callbacks.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));

  // Same with a deep box whose first run lies past `begin`.
  const Shape deep = {1 << 10, 1 << 10, 1 << 10, 8};
  const Box tail = {{1000, 1024}, {500, 1024}, {3, 5}, {0, 8}};
  calls = 0;
  ForEachRunInByteRange(deep, tail, 1, 0, int64_t{1} << 62, [&](int64_t, int64_t, int64_t n) {
    ++calls;
    EXPECT_EQ(n, 16);
  });
  EXPECT_EQ(calls, 24 * 524);
}

}  // namespace
}  // namespace placement
