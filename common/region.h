// Box geometry and byte-run enumeration for copying sub-arrays between
// row-major buffers.
//
// A Box is one half-open IndexRange per dimension, in global coordinates of a
// tensor; a buffer "holding exactly box B" stores B's elements row-major with
// no padding (what one device shard holds). The run enumerators below turn a
// box-to-box copy, or the slice of an upload's byte stream that lands in one
// shard, into a minimal list of memcpy-sized runs, so callers never touch
// element indices.
//
// Example: shape [4, 6], elem_size 4, shard box [0:4, 2:4] (a column block).
//   ForEachRunInByteRange(shape, box, 4, 0, 96, fn) calls
//     fn(8, 0, 8)     row 0, columns 2..3 -> box bytes [0, 8)
//     fn(32, 8, 8)    row 1
//     fn(56, 16, 8), fn(80, 24, 8)
//   ForEachCopyRun([0:2, 2:4], /*src=*/[0:4, 0:6], /*dst=*/[0:4, 2:4], 4, fn)
//     fn(8, 0, 8), fn(32, 8, 8).
//
// All functions are pure and thread-safe. They never allocate more than
// O(rank). Callers validate geometry first (NamedSharding::IndexDomains
// produces boxes that satisfy the REQUIRES lines).
#ifndef PLACEMENT_COMMON_REGION_H_
#define PLACEMENT_COMMON_REGION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/types/span.h"
#include "common/shape.h"

namespace placement {

// Half-open index range [begin, end) along one dimension.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;

  int64_t size() const { return end - begin; }
  bool operator==(const IndexRange&) const = default;
};

// One IndexRange per tensor dimension, in global coordinates; {} for a scalar.
using Box = std::vector<IndexRange>;

// "[0:4, 2:4]"; "[]" for a scalar box.
std::string BoxToString(const Box& box);

// Product of the extents; 1 for a rank-0 box, 0 when any range is empty.
int64_t BoxNumElements(const Box& box);

// Extents of `box` (its shard shape).
Shape BoxShape(const Box& box);

// [0, shape[d]) in every dimension.
Box FullBox(absl::Span<const int64_t> shape);

// True when `inner` has the rank of `outer` and lies inside it. An empty range
// is inside when its begin lies within [outer.begin, outer.end].
bool BoxContains(const Box& outer, const Box& inner);

// The intersection of `a` and `b`; nullopt when it is empty in any dimension.
// Two rank-0 boxes intersect in the rank-0 box {} (one element).
// REQUIRES: a.size() == b.size().
std::optional<Box> IntersectBoxes(const Box& a, const Box& b);

// Calls fn(src_byte_offset, dst_byte_offset, byte_length) for each maximal
// run that is contiguous in both buffers, in increasing row-major order of
// `region`, to copy `region` (global coordinates) from a row-major buffer
// holding exactly `src_box` into one holding exactly `dst_box`. Trailing
// dimensions that are whole in region, src and dst are coalesced into one
// run. Nothing is called when `region` is empty; a rank-0 region is one run of
// elem_size bytes.
// REQUIRES: region, src_box and dst_box have the same rank; region lies inside
// both boxes; elem_size > 0.
void ForEachCopyRun(const Box& region, const Box& src_box, const Box& dst_box, int64_t elem_size,
                    absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn);

// Visits, in increasing global order, the contiguous runs of `box` inside a
// row-major array of `shape`, clipped to the global byte range [begin, end):
// fn(global_byte_offset, box_byte_offset, byte_length), where box_byte_offset
// is the offset inside a buffer holding exactly `box`. The range is clamped
// to the array and may split elements (offsets are bytes, not elements).
// Costs O(rank + runs visited), independent of how many runs precede `begin`,
// so an upload can call it once per chunk per shard.
// REQUIRES: box.size() == shape.size(); box lies inside FullBox(shape);
// elem_size > 0.
void ForEachRunInByteRange(absl::Span<const int64_t> shape, const Box& box, int64_t elem_size,
                           int64_t begin, int64_t end,
                           absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn);

}  // namespace placement

#endif  // PLACEMENT_COMMON_REGION_H_
