#include "server/device/block_cache.h"

#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(BlockCacheTest, ReusesExactSizesWithinTheLimit) {
  BlockCache cache(100);
  int a = 0, b = 0, c = 0;
  EXPECT_EQ(cache.Take(40), nullptr);
  EXPECT_TRUE(cache.Put(40, &a));
  EXPECT_TRUE(cache.Put(40, &b));
  EXPECT_FALSE(cache.Put(40, &c));  // 120 > 100: the caller frees it
  EXPECT_EQ(cache.bytes(), 80);
  EXPECT_EQ(cache.Take(30), nullptr);
  void* first = cache.Take(40);
  void* second = cache.Take(40);
  EXPECT_TRUE((first == &a && second == &b) || (first == &b && second == &a));
  EXPECT_EQ(cache.Take(40), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(BlockCacheTest, ClearReleasesEverything) {
  BlockCache cache(1000);
  int blocks[3];
  for (int& b : blocks) ASSERT_TRUE(cache.Put(10, &b));
  std::vector<void*> released;
  cache.Clear([&](void* block) { released.push_back(block); });
  EXPECT_EQ(released.size(), 3u);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_EQ(cache.Take(10), nullptr);
}

TEST(BlockCacheTest, TakeLargestRemovesBiggestBlocksUntilEnough) {
  BlockCache cache(1000);
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(cache.Put(10, &a));
  ASSERT_TRUE(cache.Put(30, &b));
  ASSERT_TRUE(cache.Put(20, &c));
  auto taken = cache.TakeLargest(25);
  ASSERT_EQ(taken.size(), 1u);
  EXPECT_EQ(taken[0].first, 30);
  EXPECT_EQ(taken[0].second, &b);
  EXPECT_EQ(cache.bytes(), 30);
  taken = cache.TakeLargest(25);  // 20, then 10: at least 25 bytes
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(taken[0].first, 20);
  EXPECT_EQ(taken[1].first, 10);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_TRUE(cache.TakeLargest(5).empty());
}

TEST(BlockCacheTest, ZeroLimitKeepsNothing) {
  BlockCache cache(0);
  int a = 0;
  EXPECT_FALSE(cache.Put(1, &a));
}

}  // namespace
}  // namespace placement::server
