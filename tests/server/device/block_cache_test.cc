#include "server/device/block_cache.h"

#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);
constexpr MemoryOwnerTag kOwner = 1;

TEST(BlockCacheTest, ReusesExactSizesWithinTheLimit) {
  BlockCache cache(100);
  int a = 0, b = 0, c = 0;
  EXPECT_EQ(cache.Take(40, kOwner), nullptr);
  EXPECT_TRUE(cache.Put(40, &a, kOwner, kT0));
  EXPECT_TRUE(cache.Put(40, &b, kOwner, kT0));
  EXPECT_FALSE(cache.Put(40, &c, kOwner, kT0));  // 120 > 100: the caller frees it
  EXPECT_EQ(cache.bytes(), 80);
  EXPECT_EQ(cache.Take(30, kOwner), nullptr);
  void* first = cache.Take(40, kOwner);
  void* second = cache.Take(40, kOwner);
  EXPECT_TRUE((first == &a && second == &b) || (first == &b && second == &a));
  EXPECT_EQ(cache.Take(40, kOwner), nullptr);
  EXPECT_EQ(cache.bytes(), 0);
}

// A block goes back only to allocations of the owner that freed it: one
// tenant's bytes never reach another's buffer.
TEST(BlockCacheTest, ABlockIsReusedOnlyForItsOwner) {
  BlockCache cache(1000);
  int a = 0, daemon = 0;
  EXPECT_TRUE(cache.Put(40, &a, /*owner=*/1, kT0));
  EXPECT_TRUE(cache.Put(40, &daemon, kDaemonMemory, kT0));
  EXPECT_EQ(cache.Take(40, /*owner=*/2), nullptr);
  EXPECT_EQ(cache.Take(40, /*owner=*/1), &a);
  EXPECT_EQ(cache.Take(40, /*owner=*/1), nullptr);
  EXPECT_EQ(cache.Take(40, kDaemonMemory), &daemon);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(BlockCacheTest, ClearReleasesEverything) {
  BlockCache cache(1000);
  int blocks[3];
  for (int& b : blocks) ASSERT_TRUE(cache.Put(10, &b, kOwner, kT0));
  std::vector<void*> released;
  cache.Clear([&](void* block) { released.push_back(block); });
  EXPECT_EQ(released.size(), 3u);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_EQ(cache.Take(10, kOwner), nullptr);
}

TEST(BlockCacheTest, TakeLargestRemovesBiggestBlocksUntilEnough) {
  BlockCache cache(1000);
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(cache.Put(10, &a, kOwner, kT0));
  ASSERT_TRUE(cache.Put(30, &b, kOwner, kT0));
  ASSERT_TRUE(cache.Put(20, &c, kOwner, kT0));
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

TEST(BlockCacheTest, TakeReusesTheWarmestBlockAndDecayTakesTheIdleOnes) {
  BlockCache cache(1000);
  int old_block = 0, warm = 0, other = 0;
  ASSERT_TRUE(cache.Put(10, &old_block, kOwner, kT0));
  ASSERT_TRUE(cache.Put(10, &warm, kOwner, kT0 + absl::Seconds(5)));
  ASSERT_TRUE(cache.Put(20, &other, kOwner, kT0 + absl::Seconds(1)));
  // Blocks cached before kT0 + 2s: the old 10-byte one and the 20-byte one.
  auto idle = cache.TakeCachedBefore(kT0 + absl::Seconds(2));
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_EQ(cache.bytes(), 10);
  EXPECT_EQ(cache.Take(10, kOwner), &warm);
  ASSERT_TRUE(cache.Put(10, &old_block, kOwner, kT0));
  ASSERT_TRUE(cache.Put(10, &warm, kOwner, kT0 + absl::Seconds(5)));
  EXPECT_EQ(cache.Take(10, kOwner), &warm);  // the most recently cached of its size
  EXPECT_EQ(cache.Take(10, kOwner), &old_block);
  EXPECT_TRUE(cache.TakeCachedBefore(absl::InfiniteFuture()).empty());
}

TEST(BlockCacheTest, ZeroLimitKeepsNothing) {
  BlockCache cache(0);
  int a = 0;
  EXPECT_FALSE(cache.Put(1, &a, kOwner, kT0));
}

}  // namespace
}  // namespace placement::server
