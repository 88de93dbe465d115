// BudgetedBackend through the real CpuBackend (page-rounded blocks from a
// HostBlockPool, a per-buffer host overhead): a buffer is charged its block
// and its overhead, not the bytes asked for; the block cache is counted
// against the budget, capped on its own, evicted largest first to make room,
// never the reason an allocation fails, reported apart from the bytes in
// use, and gives back the blocks nobody reused since a cutoff.
#include "server/device/budgeted_backend.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kPage = 4096;
constexpr int64_t kOverhead = kCpuBufferOverheadBytes;

std::unique_ptr<CpuBackend> Backend(int64_t budget, int64_t cache) {
  CpuBackendOptions options;
  options.num_devices = 2;
  options.device_memory_bytes = budget;
  options.cache_bytes_per_device = cache;
  return std::move(*CpuBackend::Create(options));
}

TEST(BudgetedBackendTest, ABufferIsChargedItsBlockAndItsOverhead) {
  const int64_t budget = 2 * kPage + 3 * kOverhead + kPage / 2;
  auto backend = Backend(budget, 0);
  EXPECT_EQ(backend->ChargeFor(1), kPage + kOverhead);
  EXPECT_EQ(backend->ChargeFor(kPage + 1), 2 * kPage + kOverhead);
  EXPECT_EQ(backend->ChargeFor(0), kOverhead);
  auto one = std::move(*backend->Allocate(0, 1));
  EXPECT_EQ(backend->MemoryInUse(0), 1);
  EXPECT_EQ(backend->MemoryCharged(0), kPage + kOverhead);
  auto none = std::move(*backend->Allocate(0, 0));
  EXPECT_EQ(backend->MemoryInUse(0), 1);
  EXPECT_EQ(backend->MemoryCharged(0), kPage + 2 * kOverhead);
  // A third one-byte buffer does not fit two and a half pages: each costs a
  // page and its overhead. (Charged by size, thousands would have fit.)
  auto two = std::move(*backend->Allocate(0, 1));
  auto three = backend->Allocate(0, 1);
  ASSERT_EQ(three.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(three.status().message(),
              HasSubstr(absl::StrCat("device 0: cannot allocate 1 bytes (charged ",
                                     kPage + kOverhead, ": a 4096-byte block and ", kOverhead,
                                     " bytes of host overhead); ", 2 * kPage + 3 * kOverhead,
                                     " of ", budget, " bytes charged (2 in use)")));
  one.reset();
  none.reset();
  two.reset();
  EXPECT_EQ(backend->MemoryInUse(0), 0);
  EXPECT_EQ(backend->MemoryCharged(0), 0);
  EXPECT_EQ(backend->ReleasedBuffers(), 3);
}

TEST(BudgetedBackendTest, FreedBlocksAreCachedAtTheirBlockSizeAndReportedApart) {
  auto backend = Backend(16 * kPage, 16 * kPage);
  void* first = nullptr;
  {
    auto a = std::move(*backend->Allocate(0, 3 * kPage - 10));
    first = a->data();
    EXPECT_EQ(backend->MemoryInUse(0), 3 * kPage - 10);
    EXPECT_EQ(backend->MemoryCharged(0), 3 * kPage + kOverhead);
    EXPECT_EQ(backend->MemoryCached(0), 0);
  }
  EXPECT_EQ(backend->MemoryInUse(0), 0);
  EXPECT_EQ(backend->MemoryCharged(0), 0);
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);  // the whole block
  EXPECT_EQ(backend->MemoryCached(1), 0);          // per device
  auto again = std::move(*backend->Allocate(0, 3 * kPage));
  EXPECT_EQ(again->data(), first);
  EXPECT_EQ(backend->MemoryCached(0), 0);
}

// A freed block goes back only to its memory owner (a tenant's), and
// another owner's allocation that needs the room evicts it rather than
// failing: the cache keeps owners apart without starving anyone.
TEST(BudgetedBackendTest, CachedBlocksGoBackOnlyToTheirOwner) {
  const int64_t budget = 4 * kPage + 2 * kOverhead;
  auto backend = Backend(budget, 16 * kPage);
  void* first = nullptr;
  {
    auto a = std::move(*backend->AllocateFor(0, 2 * kPage, /*owner=*/1));
    EXPECT_EQ(a->owner(), 1u);
    first = a->data();
  }
  EXPECT_EQ(backend->MemoryCached(0), 2 * kPage);
  // Owner 2 gets a block of its own; owner 1's stays cached while it fits.
  auto b = std::move(*backend->AllocateFor(0, 2 * kPage, /*owner=*/2));
  EXPECT_NE(b->data(), first);
  EXPECT_EQ(backend->MemoryCached(0), 2 * kPage);
  // The daemon's own allocations (Allocate: kDaemonMemory) are another owner.
  auto c = backend->Allocate(0, kPage);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ((*c)->owner(), kDaemonMemory);
  // It did not fit beside owner 1's cached block: that was evicted.
  EXPECT_EQ(backend->MemoryCached(0), 0);
  EXPECT_LE(backend->MemoryCharged(0) + backend->MemoryCached(0), budget);
  void* second = b->data();
  void* daemon_block = (*c)->data();
  b.reset();
  c->reset();
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);
  // Owner 1 asks for the daemon's block's size: a fresh block, not that one.
  auto d = std::move(*backend->AllocateFor(0, kPage, /*owner=*/1));
  EXPECT_NE(d->data(), daemon_block);
  // Owner 2's freed block comes back to owner 2.
  auto e = std::move(*backend->AllocateFor(0, 2 * kPage, /*owner=*/2));
  EXPECT_EQ(e->data(), second);
}

TEST(BudgetedBackendTest, TheCacheMakesRoomWithinTheBudget) {
  const int64_t budget = 4 * kPage + 2 * kOverhead;
  auto backend = Backend(budget, 16 * kPage);
  auto keep = std::move(*backend->Allocate(0, 2 * kPage));
  { auto a = std::move(*backend->Allocate(0, 2 * kPage)); }
  EXPECT_EQ(backend->MemoryCached(0), 2 * kPage);
  // One more page does not fit beside the cached block: it is evicted.
  auto b = std::move(*backend->Allocate(0, kPage));
  EXPECT_EQ(backend->MemoryCached(0), 0);
  EXPECT_LE(backend->MemoryCharged(0) + backend->MemoryCached(0), budget);
  keep.reset();
  b.reset();
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);
  EXPECT_LE(backend->MemoryCharged(0) + backend->MemoryCached(0), budget);
}

TEST(BudgetedBackendTest, TheCacheHasItsOwnBound) {
  auto backend = Backend(64 * kPage, 4 * kPage);
  { auto big = std::move(*backend->Allocate(0, 5 * kPage)); }
  EXPECT_EQ(backend->MemoryCached(0), 0);  // 5 pages > the 4-page cache
  { auto small = std::move(*backend->Allocate(0, 3 * kPage)); }
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);
  { auto other = std::move(*backend->Allocate(0, 2 * kPage)); }
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);  // 3 + 2 > 4: the new one is freed
}

TEST(BudgetedBackendTest, MakingRoomEvictsTheLargestBlocksFirst) {
  const int64_t budget = 10 * kPage + 2 * kOverhead;
  auto backend = Backend(budget, 10 * kPage);
  {
    auto a = std::move(*backend->Allocate(0, kPage));
    auto b = std::move(*backend->Allocate(0, 2 * kPage));
    auto c = std::move(*backend->Allocate(0, 4 * kPage));
  }
  EXPECT_EQ(backend->MemoryCached(0), 7 * kPage);
  // 6 pages need room the 3 + overhead free do not give: the 4-page block
  // goes, 1 + 2 stay.
  auto d = std::move(*backend->Allocate(0, 6 * kPage));
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);
  EXPECT_EQ(backend->MemoryInUse(0), 6 * kPage);
  // The whole rest of the budget: everything cached goes.
  auto e = std::move(*backend->Allocate(0, 4 * kPage));
  EXPECT_EQ(backend->MemoryCached(0), 0);
  EXPECT_EQ(backend->MemoryCharged(0), budget);
  backend->ReleaseCache();
  EXPECT_EQ(backend->MemoryInUse(0), 10 * kPage);
}

TEST(BudgetedBackendTest, ReleaseCacheEmptiesEveryDevice) {
  auto backend = Backend(8 * kPage, 8 * kPage);
  { auto a = std::move(*backend->Allocate(0, kPage)); }
  { auto b = std::move(*backend->Allocate(1, 2 * kPage)); }
  EXPECT_EQ(backend->MemoryCached(0) + backend->MemoryCached(1), 3 * kPage);
  backend->ReleaseCache();
  EXPECT_EQ(backend->MemoryCached(0), 0);
  EXPECT_EQ(backend->MemoryCached(1), 0);
}

TEST(BudgetedBackendTest, ReleaseCachedBeforeGivesBackOnlyTheBlocksIdleSinceTheCutoff) {
  auto backend = Backend(16 * kPage, 16 * kPage);
  { auto old_block = std::move(*backend->Allocate(0, kPage)); }
  absl::SleepFor(absl::Milliseconds(5));
  const absl::Time cutoff = absl::Now();
  absl::SleepFor(absl::Milliseconds(5));
  { auto recent = std::move(*backend->Allocate(1, 2 * kPage)); }
  EXPECT_EQ(backend->ReleaseCachedBefore(cutoff), kPage);
  EXPECT_EQ(backend->MemoryCached(0), 0);
  EXPECT_EQ(backend->MemoryCached(1), 2 * kPage);
  EXPECT_EQ(backend->ReleaseCachedBefore(absl::InfiniteFuture()), 2 * kPage);
  EXPECT_EQ(backend->MemoryCached(1), 0);
}

// One tenant that churns through the cache does not keep another's freed
// blocks out: when the cache's cap is reached, the owner holding the most
// makes room (its largest blocks are freed), down to a fair share.
TEST(BudgetedBackendTest, TheCacheCapIsSharedFairlyBetweenOwners) {
  auto backend = Backend(64 * kPage, 4 * kPage);
  {
    std::vector<std::unique_ptr<DeviceBuffer>> held;
    for (int i = 0; i < 4; ++i) held.push_back(std::move(*backend->AllocateFor(0, kPage, 1)));
  }
  EXPECT_EQ(backend->MemoryCached(0), 4 * kPage);  // owner 1 fills the cap
  void* owner2_blocks[2];
  {
    auto a = std::move(*backend->AllocateFor(0, kPage, 2));
    auto b = std::move(*backend->AllocateFor(0, kPage, 2));
    owner2_blocks[0] = a->data();
    owner2_blocks[1] = b->data();
  }
  // Owner 2's two blocks were kept, each in place of one of owner 1's.
  EXPECT_EQ(backend->MemoryCached(0), 4 * kPage);
  auto a = std::move(*backend->AllocateFor(0, kPage, 2));
  auto b = std::move(*backend->AllocateFor(0, kPage, 2));
  EXPECT_TRUE((a->data() == owner2_blocks[0] && b->data() == owner2_blocks[1]) ||
              (a->data() == owner2_blocks[1] && b->data() == owner2_blocks[0]));
  EXPECT_EQ(backend->MemoryCached(0), 2 * kPage);  // owner 1's remaining two
}

TEST(BudgetedBackendTest, ReleaseCachedOfGivesBackOneOwnersBlocks) {
  auto backend = Backend(16 * kPage, 16 * kPage);
  { auto a = std::move(*backend->AllocateFor(0, kPage, 1)); }
  { auto b = std::move(*backend->AllocateFor(1, 2 * kPage, 1)); }
  void* kept = nullptr;
  {
    auto c = std::move(*backend->AllocateFor(0, 3 * kPage, 2));
    kept = c->data();
  }
  EXPECT_EQ(backend->ReleaseCachedOf(1), 3 * kPage);  // on both devices
  EXPECT_EQ(backend->MemoryCached(0), 3 * kPage);
  EXPECT_EQ(backend->MemoryCached(1), 0);
  EXPECT_EQ(backend->ReleaseCachedOf(1), 0);
  auto c = std::move(*backend->AllocateFor(0, 3 * kPage, 2));
  EXPECT_EQ(c->data(), kept);
}

TEST(BudgetedBackendTest, ConcurrentTrafficKeepsChargedPlusCachedWithinTheBudget) {
  const int64_t budget = 64 * kPage;
  auto backend = Backend(budget, 32 * kPage);
  std::atomic<int> violations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::unique_ptr<DeviceBuffer>> held;
      for (int i = 0; i < 300; ++i) {
        const int64_t size = ((i * 7 + t * 3) % 5 + 1) * kPage;
        auto b = backend->Allocate(0, size);
        if (b.ok()) held.push_back(std::move(*b));
        if (held.size() > 3) held.erase(held.begin());
        // Snapshots race; allow one in-flight block per thread.
        if (backend->MemoryCharged(0) + backend->MemoryCached(0) >
            budget + 4 * (5 * kPage + kOverhead)) {
          violations.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(violations.load(), 0);
  EXPECT_EQ(backend->MemoryInUse(0), 0);
  EXPECT_EQ(backend->MemoryCharged(0), 0);
  EXPECT_LE(backend->MemoryCached(0), 32 * kPage);
}

}  // namespace
}  // namespace placement::server
