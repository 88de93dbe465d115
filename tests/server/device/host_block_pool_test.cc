// HostBlockPool: blocks are whole pages, and a freed block's pages leave the
// process's resident set at once -- for small blocks (slabs) and mapped ones,
// under any order of frees -- and empty slab chunks are unmapped; large
// blocks are memory files (exportable) up to the pool's bound.
#include "server/device/host_block_pool.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "server/device/memory_reclaimer.h"

namespace placement::server {
namespace {

constexpr int64_t kPage = HostBlockPool::kPageBytes;
constexpr int64_t kMiB = 1 << 20;

TEST(HostBlockPoolTest, BlocksAreWholePages) {
  EXPECT_EQ(HostBlockPool::BlockSize(0), kPage);
  EXPECT_EQ(HostBlockPool::BlockSize(1), kPage);
  EXPECT_EQ(HostBlockPool::BlockSize(kPage), kPage);
  EXPECT_EQ(HostBlockPool::BlockSize(kPage + 1), 2 * kPage);
}

TEST(HostBlockPoolTest, FreedSmallBlocksLeaveTheResidentSetInAnyOrder) {
  HostBlockPool pool;
  const int64_t before = ResidentBytesOfSelf();
  // 64 MiB of 1..7-page blocks, touched, then every other one freed, then
  // the rest: the resident set follows the live blocks both ways.
  std::vector<std::pair<void*, int64_t>> blocks;
  int64_t total = 0;
  for (int i = 0; total < 64 * kMiB; ++i) {
    const int64_t size = (i % 7 + 1) * kPage;
    auto block = pool.Allocate(size);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(*block) % kPage, 0u);
    std::memset(*block, 0x5a, static_cast<size_t>(size));
    blocks.emplace_back(*block, size);
    total += size;
  }
  const int64_t full = ResidentBytesOfSelf();
  EXPECT_GE(full - before, total - 4 * kMiB);
  int64_t freed = 0;
  for (size_t i = 0; i < blocks.size(); i += 2) {
    pool.Free(blocks[i].first, blocks[i].second);
    freed += blocks[i].second;
  }
  // Half the blocks, spread over every chunk: malloc would have kept them.
  EXPECT_LE(ResidentBytesOfSelf(), full - freed + 4 * kMiB);
  for (size_t i = 1; i < blocks.size(); i += 2) pool.Free(blocks[i].first, blocks[i].second);
  EXPECT_LE(ResidentBytesOfSelf(), before + 4 * kMiB);
  EXPECT_EQ(pool.chunks(), 0);
}

TEST(HostBlockPoolTest, ASlotIsReusedAndReadsZeroAfterAFree) {
  HostBlockPool pool;
  auto a = pool.Allocate(2 * kPage);
  ASSERT_TRUE(a.ok());
  std::memset(*a, 7, 2 * kPage);
  auto keep = pool.Allocate(2 * kPage);  // keeps the chunk mapped
  pool.Free(*a, 2 * kPage);
  auto b = pool.Allocate(2 * kPage);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, *a);
  EXPECT_EQ(static_cast<char*>(*b)[0], 0);
  pool.Free(*b, 2 * kPage);
  pool.Free(*keep, 2 * kPage);
  EXPECT_EQ(pool.chunks(), 0);
}

TEST(HostBlockPoolTest, LargeBlocksAreMappingsOfTheirOwn) {
  HostBlockPool pool;
  const int64_t before = ResidentBytesOfSelf();
  auto block = pool.Allocate(32 * kMiB);
  ASSERT_TRUE(block.ok());
  std::memset(*block, 1, 32 * kMiB);
  EXPECT_GE(ResidentBytesOfSelf(), before + 30 * kMiB);
  pool.Free(*block, 32 * kMiB);
  EXPECT_LE(ResidentBytesOfSelf(), before + 2 * kMiB);
  EXPECT_EQ(pool.chunks(), 0);
}

TEST(HostBlockPoolTest, LargeBlocksAreMemoryFilesUpToTheBound) {
  HostBlockPool pool(/*max_file_blocks=*/2);
  auto a = pool.Allocate(kMiB);
  auto b = pool.Allocate(kMiB);
  auto c = pool.Allocate(kMiB);
  auto small = pool.Allocate(kPage);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok() && small.ok());
  EXPECT_GE(pool.FileOf(*a), 0);
  EXPECT_GE(pool.FileOf(*b), 0);
  EXPECT_EQ(pool.FileOf(*c), -1);  // past the bound: anonymous
  EXPECT_EQ(pool.FileOf(*small), -1);
  EXPECT_EQ(pool.file_blocks(), 2);
  // A memory file's pages leave the resident set when the block is freed.
  const int64_t before = ResidentBytesOfSelf();
  auto big = [&] {
    pool.Free(*a, kMiB);
    return pool.Allocate(32 * kMiB);
  }();
  ASSERT_TRUE(big.ok());
  EXPECT_GE(pool.FileOf(*big), 0);
  std::memset(*big, 1, 32 * kMiB);
  EXPECT_GE(ResidentBytesOfSelf(), before + 30 * kMiB);
  pool.Free(*big, 32 * kMiB);
  EXPECT_LE(ResidentBytesOfSelf(), before + 2 * kMiB);
  pool.Free(*b, kMiB);
  pool.Free(*c, kMiB);
  pool.Free(*small, kPage);
  EXPECT_EQ(pool.file_blocks(), 0);
  EXPECT_EQ(pool.chunks(), 0);
}

// A fresh memory-file block is written whole next, so it is resident when
// Allocate returns: populated at once, and from 64 MiB on several threads
// (PopulateWrite), which must leave every page of it populated, the last
// thread's share included.
TEST(HostBlockPoolTest, FreshMemoryFileBlocksAreResidentAtOnceLargeOnesToo) {
  HostBlockPool pool(/*max_file_blocks=*/2);
  for (int64_t bytes : {8 * kMiB, 96 * kMiB + 5 * kPage}) {
    SCOPED_TRACE(bytes);
    const int64_t block = HostBlockPool::BlockSize(bytes);
    const int64_t before = ResidentBytesOfSelf();
    auto data = pool.Allocate(block);
    ASSERT_TRUE(data.ok()) << data.status();
    ASSERT_GE(pool.FileOf(*data), 0);
    // Nothing written yet: the pages are there already.
    EXPECT_GE(ResidentBytesOfSelf(), before + block - kMiB);
    pool.Free(*data, block);
    EXPECT_LE(ResidentBytesOfSelf(), before + 2 * kMiB);
  }
}

}  // namespace
}  // namespace placement::server
