// BoxCursor: walks the bytes of a box `region` (row-major, the order in which
// a stream of the region's bytes arrives or leaves) inside a buffer that is
// laid out as the larger box `outer` -- a shard buffer holding `outer`'s
// elements -- as contiguous runs of the buffer, resumably, a bounded number
// of bytes at a time. This is how a daemon streams one box of a shard to
// another daemon (ReadBox) and how it writes a streamed box into a shard,
// with host memory O(chunk) whatever the box's size: the run list for a
// chunk is computed when it is needed, never for the whole box.
//
// Example: outer [0,4)x[0,6), region [1,3)x[2,4), 4-byte elements: the
// stream is region rows (1,2..3) and (2,2..3); runs in the buffer are
// (offset 32, 8 bytes) and (offset 56, 8 bytes). Dimensions where the
// region covers `outer` entirely merge into longer runs.
//
// Not thread-safe (one stream owns it).
#ifndef PLACEMENT_SERVER_TENSOR_BOX_CURSOR_H_
#define PLACEMENT_SERVER_TENSOR_BOX_CURSOR_H_

#include <cstdint>
#include <vector>

#include "common/region.h"
#include "server/device/device_backend.h"

namespace placement::server {

class BoxCursor {
 public:
  // REQUIRES: BoxContains(outer, region); elem_size > 0.
  BoxCursor(const Box& outer, const Box& region, int64_t elem_size);

  // Total bytes of the region, and how many have been walked so far.
  int64_t total_bytes() const { return total_; }
  int64_t position() const { return position_; }
  bool done() const { return position_ == total_; }

  // Appends to `runs` the buffer runs of the next min(max_bytes, remaining)
  // stream bytes: src_offset / dst_offset = (offset in the outer buffer,
  // offset in the caller's chunk starting at 0) when `buffer_is_source`,
  // swapped otherwise. Returns the bytes covered.
  int64_t Next(int64_t max_bytes, bool buffer_is_source, std::vector<ByteRun>* runs);

 private:
  int64_t total_ = 0;
  int64_t position_ = 0;
  int64_t elem_ = 0;
  // The walk: outer dims [0, split) are iterated (odometer over the
  // region's ranges); dims [split, rank) form one contiguous block of
  // `block_` bytes per step.
  size_t split_ = 0;
  int64_t block_ = 0;
  std::vector<int64_t> index_;    // current odometer index over dims [0, split)
  std::vector<int64_t> begin_;    // region begins
  std::vector<int64_t> end_;      // region ends
  std::vector<int64_t> strides_;  // byte strides of `outer` per dim
  std::vector<int64_t> outer_begin_;
  int64_t within_block_ = 0;  // bytes of the current block already walked
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_BOX_CURSOR_H_
