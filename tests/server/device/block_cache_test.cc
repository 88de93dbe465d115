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

TEST(BlockCacheTest, ZeroLimitKeepsNothing) {
  BlockCache cache(0);
  int a = 0;
  EXPECT_FALSE(cache.Put(1, &a));
}

}  // namespace
}  // namespace placement::server
