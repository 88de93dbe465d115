// CheckRegionSlice: every way a slice can miss its region, with the numbers
// in the message, including sums that would wrap int64.
#include "server/region/region_bounds.h"

#include <cstdint>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

TEST(RegionBoundsTest, SlicesInsideTheRegionPass) {
  EXPECT_TRUE(CheckRegionSlice("region", "r-1", 64, 0, 64).ok());
  EXPECT_TRUE(CheckRegionSlice("region", "r-1", 64, 60, 4).ok());
  EXPECT_TRUE(CheckRegionSlice("region", "r-1", 64, 64, 0).ok());
  EXPECT_TRUE(CheckRegionSlice("region", "r-1", 64, 0, 0).ok());
}

TEST(RegionBoundsTest, NegativeOffsetOrSizeIsInvalidArgument) {
  absl::Status offset = CheckRegionSlice("chunk.region", "r-1", 64, -1, 4);
  EXPECT_EQ(offset.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(offset.message(), "chunk.region.offset must be >= 0, got -1");
  absl::Status size = CheckRegionSlice("region", "r-1", 64, 0, -4);
  EXPECT_EQ(size.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(size.message(), "region.size must be >= 0, got -4");
}

TEST(RegionBoundsTest, OffsetPastTheEndIsOutOfRange) {
  absl::Status status = CheckRegionSlice("region", "r-1", 64, 65, 0);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(), "region.offset 65 is past the end of region r-1 (64 bytes)");
}

TEST(RegionBoundsTest, SliceRunningPastTheEndIsOutOfRange) {
  absl::Status status = CheckRegionSlice("destination", "r-1", 64, 60, 8);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(status.message(),
            "destination.offset 60 + destination.size 8 = 68 is past the end of region r-1 (64 "
            "bytes)");
}

TEST(RegionBoundsTest, SumsThatWrapInt64AreOutOfRangeNotAccepted) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  // offset within the region, size so large that offset + size wraps.
  absl::Status status = CheckRegionSlice("region", "r-1", 64, 8, kMax);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("overflows int64"));
  EXPECT_THAT(status.message(), HasSubstr("region.offset 8 + region.size 9223372036854775807"));
  // A huge region does not let a wrapping sum through either.
  absl::Status huge = CheckRegionSlice("region", "r-1", kMax, kMax, kMax);
  EXPECT_EQ(huge.code(), absl::StatusCode::kOutOfRange);
  // Exactly at the limit without wrapping.
  EXPECT_TRUE(CheckRegionSlice("region", "r-1", kMax, kMax - 1, 1).ok());
}

}  // namespace
}  // namespace placement::server
