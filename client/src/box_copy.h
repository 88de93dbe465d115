// CopyBox: moves the bytes of one shard's box between a whole row-major
// array and the shard's own row-major buffer -- the gather that views'
// CopyTo does (box -> array) and the scatter that uploads written in place
// do (array -> box). Not installed.
#ifndef PLACEMENT_CLIENT_SRC_BOX_COPY_H_
#define PLACEMENT_CLIENT_SRC_BOX_COPY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "placement/client/types.h"

namespace placement::client {

// Both copy the box `ranges` (clipped to `shape`) of an array of `shape`
// with elements of `element` bytes, between the whole array and the box's
// own bytes (row-major, extents = the clipped ranges): one contiguous run
// per row of the box, the trailing dimensions it covers whole merged into
// the row; runs of 16 MiB or more go through ParallelCopy. They return the
// bytes copied. REQUIRES: ranges.size() == shape.size(); the buffers hold
// their bytes.
// Whether the box `ranges` of an array of `shape` is one contiguous run of
// the array's bytes (every dimension after the first taken whole).
bool IsOneRun(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges);

// The bytes of the box `ranges` clipped to `shape` (0 for an empty box).
int64_t BoxBytes(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                 int64_t element);

int64_t CopyBoxToArray(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                       int64_t element, const std::byte* box, std::byte* array);
// CopyBoxToArray, each run copied by copy(to, from, bytes) instead.
int64_t CopyBoxToArray(
    const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges, int64_t element,
    const std::byte* box, std::byte* array,
    absl::FunctionRef<void(std::byte* to, const std::byte* from, size_t n)> copy);
int64_t CopyArrayToBox(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                       int64_t element, const std::byte* array, std::byte* box);
// CopyArrayToBox, each run copied by copy(to, from, bytes) instead.
int64_t CopyArrayToBox(
    const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges, int64_t element,
    const std::byte* array, std::byte* box,
    absl::FunctionRef<void(std::byte* to, const std::byte* from, size_t n)> copy);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_BOX_COPY_H_
