// Bounds checks for "bytes [offset, offset + size) of a region" (RegionSlice).
// Overflow-safe: offset + size is never computed when it could wrap int64, so
// a hostile slice such as offset = 2^62, size = 2^62 + 2^62 cannot pass.
//
// Pure and thread-safe.
#ifndef PLACEMENT_SERVER_REGION_REGION_BOUNDS_H_
#define PLACEMENT_SERVER_REGION_REGION_BOUNDS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace placement::server {

// OK when 0 <= offset, 0 <= size and offset + size <= region_size.
// INVALID_ARGUMENT for a negative offset or size ("region.offset must be >= 0,
// got -1"); OUT_OF_RANGE when the slice does not fit ("region.offset 60 +
// region.size 8 = 68 is past the end of region r-1 (64 bytes)"; when the sum
// wraps int64 the message says so instead of printing it). `field` names the
// RegionSlice in the request ("region", "chunk.region", "destination").
absl::Status CheckRegionSlice(absl::string_view field, absl::string_view region_id,
                              int64_t region_size, int64_t offset, int64_t size);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_REGION_BOUNDS_H_
