// CopyBoxToArray / CopyArrayToBox: the scatter of uploads written in place
// and the gather of views and downloads read in place, against a
// hand-computed box (row-major, trailing dimensions merged into a row),
// rank 0, an empty box, and a box covering the array (one run).
#include "client/src/box_copy.h"

#include <cstddef>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace placement::client {
namespace {

std::vector<std::byte> Iota(size_t n) {
  std::vector<std::byte> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<std::byte>(i % 251);
  return out;
}

TEST(BoxCopyTest, ScattersAndGathersAnInnerBox) {
  // u16[4, 3, 5]; the box [1,3) x [0,3) x [2,4): 2 x 3 x 2 elements.
  const std::vector<int64_t> shape = {4, 3, 5};
  const std::vector<IndexRange> box = {{1, 3}, {0, 3}, {2, 4}};
  const std::vector<std::byte> array = Iota(4 * 3 * 5 * 2);
  EXPECT_EQ(BoxBytes(shape, box, 2), 2 * 3 * 2 * 2);
  std::vector<std::byte> shard(2 * 3 * 2 * 2);
  EXPECT_EQ(CopyArrayToBox(shape, box, 2, array.data(), shard.data()), 24);
  size_t k = 0;
  for (int64_t i = 1; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t l = 2; l < 4; ++l) {
        for (int b = 0; b < 2; ++b) {
          ASSERT_EQ(shard[k++], array[((i * 3 + j) * 5 + l) * 2 + b]) << i << j << l;
        }
      }
    }
  }
  std::vector<std::byte> back(array.size(), std::byte{0});
  EXPECT_EQ(CopyBoxToArray(shape, box, 2, shard.data(), back.data()), 24);
  for (size_t n = 0; n < back.size(); ++n) {
    const size_t e = n / 2, l = e % 5, i = e / 15;
    const bool inside = i >= 1 && i < 3 && l >= 2 && l < 4;
    EXPECT_EQ(back[n], inside ? array[n] : std::byte{0}) << n;
  }
}

TEST(BoxCopyTest, RankZeroEmptyAndWholeBoxes) {
  const std::vector<std::byte> one = Iota(4);
  std::vector<std::byte> out(4);
  EXPECT_EQ(CopyArrayToBox({}, {}, 4, one.data(), out.data()), 4);
  EXPECT_EQ(out, one);
  // Padded shardings end in empty boxes: nothing moves.
  EXPECT_EQ(BoxBytes({8}, {{8, 8}}, 4), 0);
  EXPECT_EQ(CopyArrayToBox({8}, {{8, 8}}, 4, nullptr, nullptr), 0);
  // A box covering rows [2, 4) of a [4, 1024] array whole: one run.
  const std::vector<std::byte> array = Iota(4 * 1024);
  std::vector<std::byte> rows(2 * 1024);
  EXPECT_EQ(CopyArrayToBox({4, 1024}, {{2, 4}, {0, 1024}}, 1, array.data(), rows.data()), 2048);
  EXPECT_TRUE(std::equal(rows.begin(), rows.end(), array.begin() + 2048));
}

}  // namespace
}  // namespace placement::client
