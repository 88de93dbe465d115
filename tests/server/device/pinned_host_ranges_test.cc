// PinnedHostRanges: which copies may skip staging because their host side
// lies inside memory registered for DMA.
#include "server/device/pinned_host_ranges.h"

#include <vector>

#include "gtest/gtest.h"

namespace placement::server {
namespace {

using Side = PinnedHostRanges::HostSide;

TEST(PinnedHostRangesTest, RunsInsideOneRangeAreContained) {
  std::vector<char> memory(1 << 16);
  PinnedHostRanges ranges;
  ranges.Add(memory.data() + 4096, 8192);
  const char* base = memory.data() + 4096;
  std::vector<ByteRun> inside = {{0, 100, 4096}, {4096, 0, 4096}};
  EXPECT_TRUE(ranges.Contains(base, inside, Side::kSource));
  // Destination offsets index the host when reading into it.
  std::vector<ByteRun> dst = {{100, 8000, 192}};
  EXPECT_TRUE(ranges.Contains(base, dst, Side::kDestination));
  // One byte past the end, or before the start, is not.
  std::vector<ByteRun> past = {{8000, 0, 193}};
  EXPECT_FALSE(ranges.Contains(base, past, Side::kSource));
  EXPECT_FALSE(ranges.Contains(memory.data(), inside, Side::kSource));
  EXPECT_FALSE(ranges.Contains(base, {}, Side::kSource));
  EXPECT_EQ(ranges.Remove(base), 8192);
  EXPECT_FALSE(ranges.Contains(base, inside, Side::kSource));
  EXPECT_EQ(ranges.Remove(base), 0);
}

TEST(PinnedHostRangesTest, AdjacentRangesAreSeparate) {
  std::vector<char> memory(1 << 16);
  PinnedHostRanges ranges;
  ranges.Add(memory.data(), 4096);
  ranges.Add(memory.data() + 4096, 4096);
  std::vector<ByteRun> straddling = {{4000, 0, 200}};
  EXPECT_FALSE(ranges.Contains(memory.data(), straddling, Side::kSource));
  std::vector<ByteRun> second = {{4096, 0, 4096}};
  EXPECT_TRUE(ranges.Contains(memory.data(), second, Side::kSource));
}

}  // namespace
}  // namespace placement::server
