#include "common/region.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement {

std::string BoxToString(const Box& box) {
  return absl::StrCat("[",
                      absl::StrJoin(box, ", ",
                                    [](std::string* out, const IndexRange& range) {
                                      absl::StrAppend(out, range.begin, ":", range.end);
                                    }),
                      "]");
}

int64_t BoxNumElements(const Box& box) {
  int64_t n = 1;
  for (const IndexRange& range : box) n *= std::max<int64_t>(range.size(), 0);
  return n;
}

Shape BoxShape(const Box& box) {
  Shape shape;
  shape.reserve(box.size());
  for (const IndexRange& range : box) shape.push_back(range.size());
  return shape;
}

Box FullBox(absl::Span<const int64_t> shape) {
  Box box;
  box.reserve(shape.size());
  for (int64_t d : shape) box.push_back({0, d});
  return box;
}

bool BoxContains(const Box& outer, const Box& inner) {
  if (outer.size() != inner.size()) return false;
  for (size_t d = 0; d < outer.size(); ++d) {
    if (inner[d].begin < outer[d].begin || inner[d].end > outer[d].end ||
        inner[d].begin > inner[d].end) {
      return false;
    }
  }
  return true;
}

std::optional<Box> IntersectBoxes(const Box& a, const Box& b) {
  Box out(a.size());
  for (size_t d = 0; d < a.size(); ++d) {
    out[d].begin = std::max(a[d].begin, b[d].begin);
    out[d].end = std::min(a[d].end, b[d].end);
    if (out[d].begin >= out[d].end) return std::nullopt;
  }
  return out;
}

void ForEachCopyRun(const Box& region, const Box& src_box, const Box& dst_box, int64_t elem_size,
                    absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn) {
  const int rank = static_cast<int>(region.size());
  if (BoxNumElements(region) == 0) return;
  if (rank == 0) {
    fn(0, 0, elem_size);
    return;
  }
  // Row-major element strides of the two buffers, and the offsets of the
  // region's first element in each.
  std::vector<int64_t> src_stride(rank), dst_stride(rank);
  int64_t src_offset = 0, dst_offset = 0;
  int64_t src_step = 1, dst_step = 1;
  for (int d = rank - 1; d >= 0; --d) {
    src_stride[d] = src_step;
    dst_stride[d] = dst_step;
    src_offset += (region[d].begin - src_box[d].begin) * src_step;
    dst_offset += (region[d].begin - dst_box[d].begin) * dst_step;
    src_step *= src_box[d].size();
    dst_step *= dst_box[d].size();
  }
  // Runs span dimension k and everything after it; dimensions after k are
  // whole in all three boxes, so both strides of k equal the inner size.
  int k = rank - 1;
  while (k > 0 && region[k].size() == src_box[k].size() && region[k].size() == dst_box[k].size())
    --k;
  const int64_t run_bytes = region[k].size() * src_stride[k] * elem_size;

  // Odometer over dimensions [0, k).
  std::vector<int64_t> index(k, 0);
  while (true) {
    fn(src_offset * elem_size, dst_offset * elem_size, run_bytes);
    int d = k - 1;
    for (; d >= 0; --d) {
      src_offset += src_stride[d];
      dst_offset += dst_stride[d];
      if (++index[d] < region[d].size()) break;
      src_offset -= region[d].size() * src_stride[d];
      dst_offset -= region[d].size() * dst_stride[d];
      index[d] = 0;
    }
    if (d < 0) return;
  }
}

void ForEachRunInByteRange(absl::Span<const int64_t> shape, const Box& box, int64_t elem_size,
                           int64_t begin, int64_t end,
                           absl::FunctionRef<void(int64_t, int64_t, int64_t)> fn) {
  const int rank = static_cast<int>(shape.size());
  if (BoxNumElements(box) == 0) return;
  begin = std::max<int64_t>(begin, 0);
  end = std::min(end, NumElements(shape) * elem_size);
  if (begin >= end) return;
  if (rank == 0) {
    fn(begin, begin, end - begin);
    return;
  }
  std::vector<int64_t> stride(rank);
  for (int64_t d = rank - 1, step = 1; d >= 0; --d) {
    stride[d] = step;
    step *= shape[d];
  }
  // Runs span dimension k and everything after it (whole in the box).
  int k = rank - 1;
  while (k > 0 && box[k].size() == shape[k]) --k;
  const int64_t run_bytes = box[k].size() * stride[k] * elem_size;

  // Find the first run that ends after `begin`: its outer coordinates
  // (dimensions [0, k)) are the box-clamped coordinates of the element at
  // `begin`, advanced by one when that element lies past the box on some
  // dimension. Everything below is O(rank).
  std::vector<int64_t> outer(k);
  // Advances outer[0, j) to the next position in the box; resets [j, k) to the
  // box start. False when there is no next position.
  auto advance_before = [&](int j) {
    for (int i = j; i < k; ++i) outer[i] = box[i].begin;
    for (int i = j - 1; i >= 0; --i) {
      if (++outer[i] < box[i].end) return true;
      outer[i] = box[i].begin;
    }
    return false;
  };
  int64_t element = begin / elem_size;
  bool clamped = false;
  for (int d = 0; d <= k; ++d) {
    const int64_t coord = element / stride[d];
    element %= stride[d];
    if (coord < box[d].begin) {
      clamped = true;
    } else if (coord >= box[d].end) {
      if (!advance_before(d)) return;
      clamped = true;
    } else if (d < k) {
      outer[d] = coord;
    }
    if (clamped) {
      for (int i = d; i < k; ++i) outer[i] = box[i].begin;
      break;
    }
  }

  int64_t global = box[k].begin * stride[k];  // elements
  int64_t run_index = 0;
  for (int d = 0; d < k; ++d) {
    global += outer[d] * stride[d];
    run_index = run_index * box[d].size() + (outer[d] - box[d].begin);
  }
  while (true) {
    const int64_t run_begin = global * elem_size;
    if (run_begin >= end) return;
    const int64_t lo = std::max(run_begin, begin);
    const int64_t hi = std::min(run_begin + run_bytes, end);
    fn(lo, run_index * run_bytes + (lo - run_begin), hi - lo);
    ++run_index;
    int d = k - 1;
    for (; d >= 0; --d) {
      global += stride[d];
      if (++outer[d] < box[d].end) break;
      global -= box[d].size() * stride[d];
      outer[d] = box[d].begin;
    }
    if (d < 0) return;
  }
}

}  // namespace placement
