// PieceProgress: tells a ProgressFn how far a same-host transfer written or
// read in place has come, piece by piece -- the copies of such a transfer
// run without a gRPC chunk to count, and one shard can be gigabytes. Not
// installed.
#ifndef PLACEMENT_CLIENT_SRC_PIECE_PROGRESS_H_
#define PLACEMENT_CLIENT_SRC_PIECE_PROGRESS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/functional/function_ref.h"
#include "placement/client/tensors.h"

namespace placement::client {

class PieceProgress {
 public:
  // Copies of a large transfer are cut into pieces of at most this many
  // bytes while a ProgressFn listens (one report per piece), and only then:
  // cutting costs a little (in Python a warm 256 MiB copy took 6-8 ms more
  // in four pieces).
  static constexpr size_t kPieceBytes = size_t{64} << 20;

  // `fn` may be empty (nothing is cut, nothing told). REQUIRES: `fn`
  // outlives this.
  PieceProgress(const ProgressFn& fn, int64_t total) : fn_(fn), total_(total) {}

  // copy(to, from, n) over [0, n) in pieces, counting each one done and
  // telling `fn` once kPieceBytes more are done than it was last told
  // (across calls: a box of many short rows is told every 64 MiB, not every
  // row), unless the transfer is done.
  void Copy(std::byte* to, const std::byte* from, size_t n,
            absl::FunctionRef<void(std::byte* to, const std::byte* from, size_t n)> copy) {
    const size_t piece = fn_ ? kPieceBytes : n;
    for (size_t at = 0; at < n; at += piece) {
      const size_t k = std::min(piece, n - at);
      copy(to + at, from + at, k);
      done_ += static_cast<int64_t>(k);
      if (fn_ && done_ < total_ && done_ - told_ >= static_cast<int64_t>(kPieceBytes)) Tell();
    }
  }
  // Tells `fn` what is done, unless it was told already (at a shard's end:
  // the reports before this change came once per shard).
  void Flush() {
    if (fn_ && done_ > told_) Tell();
  }
  int64_t done() const { return done_; }

 private:
  void Tell() {
    fn_(done_, total_);
    told_ = done_;
  }

  const ProgressFn& fn_;
  const int64_t total_;
  int64_t done_ = 0;
  int64_t told_ = 0;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_PIECE_PROGRESS_H_
