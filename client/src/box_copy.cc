#include "client/src/box_copy.h"

#include <algorithm>
#include <cstring>

#include "client/src/parallel_copy.h"

namespace placement::client {
namespace {

// Calls run(offset in the array, offset in the box, bytes) for every row of
// the box; returns the box's bytes.
template <typename Run>
int64_t ForEachBoxRun(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                      int64_t element, Run run_at) {
  const size_t rank = shape.size();
  if (rank == 0) {
    run_at(0, 0, static_cast<size_t>(element));
    return element;
  }
  std::vector<int64_t> extent(rank);
  int64_t elements = 1;
  for (size_t d = 0; d < rank; ++d) {
    extent[d] = std::max<int64_t>(std::min(ranges[d].end, shape[d]) - ranges[d].begin, 0);
    elements *= extent[d];
  }
  if (elements == 0) return 0;
  std::vector<int64_t> array_stride(rank, element), box_stride(rank, element);
  for (size_t d = rank; d-- > 1;) {
    array_stride[d - 1] = array_stride[d] * shape[d];
    box_stride[d - 1] = box_stride[d] * extent[d];
  }
  // Trailing dimensions the box covers whole are one run with the row.
  size_t inner = rank - 1;
  while (inner > 0 && extent[inner] == shape[inner]) --inner;
  const auto run = static_cast<size_t>(extent[inner] * array_stride[inner]);
  std::vector<int64_t> index(inner, 0);  // over dimensions [0, inner)
  while (true) {
    int64_t at_array = ranges[inner].begin * array_stride[inner], at_box = 0;
    for (size_t d = 0; d < inner; ++d) {
      at_array += (ranges[d].begin + index[d]) * array_stride[d];
      at_box += index[d] * box_stride[d];
    }
    run_at(at_array, at_box, run);
    size_t d = inner;
    while (d > 0 && ++index[d - 1] == extent[d - 1]) index[--d] = 0;
    if (d == 0) break;
  }
  return elements * element;
}

}  // namespace

bool IsOneRun(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges) {
  for (size_t d = 1; d < shape.size() && d < ranges.size(); ++d) {
    if (ranges[d].begin != 0 || std::min(ranges[d].end, shape[d]) != shape[d]) return false;
  }
  return true;
}

int64_t BoxBytes(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                 int64_t element) {
  int64_t bytes = element;
  for (size_t d = 0; d < shape.size() && d < ranges.size(); ++d) {
    bytes *= std::max<int64_t>(std::min(ranges[d].end, shape[d]) - ranges[d].begin, 0);
  }
  return bytes;
}

int64_t CopyBoxToArray(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                       int64_t element, const std::byte* box, std::byte* array) {
  return CopyBoxToArray(
      shape, ranges, element, box, array,
      [](std::byte* to, const std::byte* from, size_t n) { ParallelCopy(to, from, n); });
}

int64_t CopyBoxToArray(
    const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges, int64_t element,
    const std::byte* box, std::byte* array,
    absl::FunctionRef<void(std::byte* to, const std::byte* from, size_t n)> copy) {
  return ForEachBoxRun(shape, ranges, element, [&](int64_t at_array, int64_t at_box, size_t n) {
    copy(array + at_array, box + at_box, n);
  });
}

int64_t CopyArrayToBox(const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges,
                       int64_t element, const std::byte* array, std::byte* box) {
  return CopyArrayToBox(
      shape, ranges, element, array, box,
      [](std::byte* to, const std::byte* from, size_t n) { ParallelCopy(to, from, n); });
}

int64_t CopyArrayToBox(
    const std::vector<int64_t>& shape, const std::vector<IndexRange>& ranges, int64_t element,
    const std::byte* array, std::byte* box,
    absl::FunctionRef<void(std::byte* to, const std::byte* from, size_t n)> copy) {
  return ForEachBoxRun(shape, ranges, element, [&](int64_t at_array, int64_t at_box, size_t n) {
    copy(box + at_box, array + at_array, n);
  });
}

}  // namespace placement::client
