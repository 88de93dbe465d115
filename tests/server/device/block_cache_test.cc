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
  EXPECT_TRUE(cache.Put(40, &a, kOwner, kT0).kept);
  EXPECT_TRUE(cache.Put(40, &b, kOwner, kT0).kept);
  EXPECT_FALSE(cache.Put(40, &c, kOwner, kT0).kept);  // 120 > 100: the caller frees it
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
  EXPECT_TRUE(cache.Put(40, &a, /*owner=*/1, kT0).kept);
  EXPECT_TRUE(cache.Put(40, &daemon, kDaemonMemory, kT0).kept);
  EXPECT_EQ(cache.Take(40, /*owner=*/2), nullptr);
  EXPECT_EQ(cache.Take(40, /*owner=*/1), &a);
  EXPECT_EQ(cache.Take(40, /*owner=*/1), nullptr);
  EXPECT_EQ(cache.Take(40, kDaemonMemory), &daemon);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(BlockCacheTest, ClearReleasesEverything) {
  BlockCache cache(1000);
  int blocks[3];
  for (int& b : blocks) ASSERT_TRUE(cache.Put(10, &b, kOwner, kT0).kept);
  std::vector<void*> released;
  cache.Clear([&](void* block) { released.push_back(block); });
  EXPECT_EQ(released.size(), 3u);
  EXPECT_EQ(cache.bytes(), 0);
  EXPECT_EQ(cache.Take(10, kOwner), nullptr);
}

TEST(BlockCacheTest, TakeLargestRemovesBiggestBlocksUntilEnough) {
  BlockCache cache(1000);
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(cache.Put(10, &a, kOwner, kT0).kept);
  ASSERT_TRUE(cache.Put(30, &b, kOwner, kT0).kept);
  ASSERT_TRUE(cache.Put(20, &c, kOwner, kT0).kept);
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
  ASSERT_TRUE(cache.Put(10, &old_block, kOwner, kT0).kept);
  ASSERT_TRUE(cache.Put(10, &warm, kOwner, kT0 + absl::Seconds(5)).kept);
  ASSERT_TRUE(cache.Put(20, &other, kOwner, kT0 + absl::Seconds(1)).kept);
  // Blocks cached before kT0 + 2s: the old 10-byte one and the 20-byte one.
  auto idle = cache.TakeCachedBefore(kT0 + absl::Seconds(2));
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_EQ(cache.bytes(), 10);
  EXPECT_EQ(cache.Take(10, kOwner), &warm);
  ASSERT_TRUE(cache.Put(10, &old_block, kOwner, kT0).kept);
  ASSERT_TRUE(cache.Put(10, &warm, kOwner, kT0 + absl::Seconds(5)).kept);
  EXPECT_EQ(cache.Take(10, kOwner), &warm);  // the most recently cached of its size
  EXPECT_EQ(cache.Take(10, kOwner), &old_block);
  EXPECT_TRUE(cache.TakeCachedBefore(absl::InfiniteFuture()).empty());
}

TEST(BlockCacheTest, ZeroLimitKeepsNothing) {
  BlockCache cache(0);
  int a = 0;
  EXPECT_FALSE(cache.Put(1, &a, kOwner, kT0).kept);
}

// The cap is shared fairly: a newcomer's block pushes out blocks of the
// owner holding the most, largest first, while that owner would still hold
// more than the newcomer; nothing is taken when the block cannot be kept.
TEST(BlockCacheTest, AFullCacheMakesRoomFromTheOwnerHoldingTheMost) {
  BlockCache cache(100);
  int a[5], b[3];
  for (int& block : a) ASSERT_TRUE(cache.Put(20, &block, /*owner=*/1, kT0).kept);
  EXPECT_EQ(cache.bytes_of(1), 100);
  // Owner 2: each block evicts one of owner 1's while owner 1 holds more.
  for (int i = 0; i < 2; ++i) {
    BlockCache::PutResult put = cache.Put(20, &b[i], /*owner=*/2, kT0);
    EXPECT_TRUE(put.kept);
    ASSERT_EQ(put.evicted.size(), 1u);
    EXPECT_EQ(put.evicted[0].first, 20);
  }
  EXPECT_EQ(cache.bytes_of(1), 60);
  EXPECT_EQ(cache.bytes_of(2), 40);
  // A third would leave owner 2 holding 60 against owner 1's 40: refused,
  // and nothing is taken.
  BlockCache::PutResult refused = cache.Put(20, &b[2], /*owner=*/2, kT0);
  EXPECT_FALSE(refused.kept);
  EXPECT_TRUE(refused.evicted.empty());
  EXPECT_EQ(cache.bytes(), 100);
  // Owner 1 cannot push owner 2 out either: it holds more already.
  int c = 0;
  EXPECT_FALSE(cache.Put(20, &c, /*owner=*/1, kT0).kept);
  EXPECT_EQ(cache.bytes_of(1), 60);
  EXPECT_EQ(cache.bytes_of(2), 40);
}

TEST(BlockCacheTest, MakingRoomTakesTheRichestOwnersLargestBlocksFirst) {
  BlockCache cache(100);
  int small = 0, large = 0, other = 0, newcomer = 0;
  ASSERT_TRUE(cache.Put(10, &small, /*owner=*/1, kT0).kept);
  ASSERT_TRUE(cache.Put(60, &large, /*owner=*/1, kT0).kept);
  ASSERT_TRUE(cache.Put(30, &other, /*owner=*/2, kT0).kept);
  // Owner 3 needs 25 bytes: owner 1 holds the most (70), its 60-byte block
  // goes; owner 2's stays.
  BlockCache::PutResult put = cache.Put(25, &newcomer, /*owner=*/3, kT0);
  EXPECT_TRUE(put.kept);
  ASSERT_EQ(put.evicted.size(), 1u);
  EXPECT_EQ(put.evicted[0].second, &large);
  EXPECT_EQ(cache.bytes(), 65);
  EXPECT_EQ(cache.Take(10, /*owner=*/1), &small);
  EXPECT_EQ(cache.Take(30, /*owner=*/2), &other);
}

TEST(BlockCacheTest, RoomBelowTheCapBoundsTheCacheToo) {
  BlockCache cache(100);
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(cache.Put(30, &a, /*owner=*/1, kT0, /*room=*/50).kept);
  EXPECT_FALSE(cache.Put(30, &b, /*owner=*/1, kT0, /*room=*/50).kept);
  EXPECT_FALSE(cache.Put(60, &c, /*owner=*/2, kT0, /*room=*/50).kept);  // larger than the room
  BlockCache::PutResult put = cache.Put(20, &c, /*owner=*/2, kT0, /*room=*/30);
  EXPECT_TRUE(put.kept);  // owner 1's 30 bytes make way (30 > 20)
  ASSERT_EQ(put.evicted.size(), 1u);
  EXPECT_EQ(put.evicted[0].second, &a);
}

TEST(BlockCacheTest, TakeOwnedByTakesOneOwnersBlocksOnly) {
  BlockCache cache(1000);
  int a = 0, b = 0, c = 0;
  ASSERT_TRUE(cache.Put(10, &a, /*owner=*/1, kT0).kept);
  ASSERT_TRUE(cache.Put(20, &b, /*owner=*/2, kT0).kept);
  ASSERT_TRUE(cache.Put(30, &c, /*owner=*/1, kT0).kept);
  auto taken = cache.TakeOwnedBy(1);
  ASSERT_EQ(taken.size(), 2u);
  EXPECT_EQ(cache.bytes(), 20);
  EXPECT_EQ(cache.bytes_of(1), 0);
  EXPECT_EQ(cache.bytes_of(2), 20);
  EXPECT_TRUE(cache.TakeOwnedBy(1).empty());
  EXPECT_EQ(cache.Take(20, /*owner=*/2), &b);
}

TEST(BlockCacheTest, MakingRoomTakesSeveralBlocksOfOneSizeNewestFirst) {
  BlockCache cache(40);
  int a = 0, b = 0, c = 0, d = 0, e = 0;
  for (int* block : {&a, &b, &c, &e}) ASSERT_TRUE(cache.Put(10, block, /*owner=*/1, kT0).kept);
  BlockCache::PutResult put = cache.Put(20, &d, /*owner=*/2, kT0);
  ASSERT_TRUE(put.kept);  // owner 1 holds 40, then 30, > 20: two of its blocks make way
  ASSERT_EQ(put.evicted.size(), 2u);
  EXPECT_EQ(put.evicted[0].second, &e);
  EXPECT_EQ(put.evicted[1].second, &c);
  EXPECT_EQ(cache.bytes_of(1), 20);
  EXPECT_EQ(cache.Take(10, /*owner=*/1), &b);
  EXPECT_EQ(cache.Take(10, /*owner=*/1), &a);
  EXPECT_EQ(cache.Take(10, /*owner=*/1), nullptr);
  EXPECT_EQ(cache.Take(20, /*owner=*/2), &d);
  EXPECT_EQ(cache.bytes(), 0);
}

TEST(BlockCacheTest, SlotsOfTakenSizesAreBoundedAndDecayDropsThem) {
  BlockCache cache(1 << 20);
  int block = 0;
  // A reused size keeps its slot.
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(cache.Put(64, &block, /*owner=*/1, kT0).kept);
    ASSERT_EQ(cache.Take(64, /*owner=*/1), &block);
  }
  EXPECT_EQ(cache.slots(), 1u);
  // Many sizes, each taken again: the empty slots stop growing at the cap.
  for (int64_t size = 1; size <= 1000; ++size) {
    ASSERT_TRUE(cache.Put(size, &block, /*owner=*/1, kT0).kept);
    ASSERT_EQ(cache.Take(size, /*owner=*/1), &block);
  }
  EXPECT_LE(cache.slots(), BlockCache::kMaxSlots + 1);
  EXPECT_EQ(cache.bytes(), 0);
  // Decay drops every empty slot.
  EXPECT_TRUE(cache.TakeCachedBefore(kT0).empty());
  EXPECT_EQ(cache.slots(), 0u);
}

}  // namespace
}  // namespace placement::server
