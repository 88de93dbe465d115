#include "server/tensor/box_cursor.h"

#include <algorithm>

namespace placement::server {

BoxCursor::BoxCursor(const Box& outer, const Box& region, int64_t elem_size) : elem_(elem_size) {
  const size_t rank = outer.size();
  total_ = BoxNumElements(region) * elem_size;
  if (total_ == 0) return;
  strides_.assign(rank, elem_size);
  for (size_t d = rank; d-- > 1;) strides_[d - 1] = strides_[d] * outer[d].size();
  // The contiguous block: the innermost dims the region covers entirely,
  // plus the first dim (from the inside) it covers only partly.
  size_t split = rank;
  block_ = elem_size;
  while (split > 0) {
    const size_t d = split - 1;
    block_ *= region[d].size();
    split = d;
    if (region[d] != outer[d]) break;
  }
  split_ = split;
  for (size_t d = 0; d < rank; ++d) {
    begin_.push_back(region[d].begin);
    end_.push_back(region[d].end);
    outer_begin_.push_back(outer[d].begin);
  }
  index_.assign(begin_.begin(), begin_.begin() + split_);
}

int64_t BoxCursor::Next(int64_t max_bytes, bool buffer_is_source, std::vector<ByteRun>* runs) {
  int64_t covered = 0;
  while (covered < max_bytes && position_ < total_) {
    // Start of the current block in the outer buffer.
    int64_t offset = 0;
    for (size_t d = 0; d < split_; ++d) offset += (index_[d] - outer_begin_[d]) * strides_[d];
    if (split_ < begin_.size())
      offset += (begin_[split_] - outer_begin_[split_]) * strides_[split_];
    const int64_t take = std::min(block_ - within_block_, max_bytes - covered);
    const int64_t buffer_offset = offset + within_block_;
    runs->push_back(buffer_is_source ? ByteRun{buffer_offset, covered, take}
                                     : ByteRun{covered, buffer_offset, take});
    covered += take;
    position_ += take;
    within_block_ += take;
    if (within_block_ == block_) {
      within_block_ = 0;
      for (size_t d = split_; d-- > 0;) {
        if (++index_[d] < end_[d]) break;
        index_[d] = begin_[d];
      }
    }
  }
  return covered;
}

}  // namespace placement::server
