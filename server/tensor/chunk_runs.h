// Batches the byte runs that connect one chunk of a tensor's row-major byte
// stream with the shard buffers it overlaps. Uploads scatter a chunk into
// every shard it touches; whole-array downloads gather a chunk from the
// replica-0 shards. Both issue one backend call per shard per chunk (or per
// kMaxRunsPerBatch runs, which bounds the run list for very narrow shards).
//
// Offsets are int64 bytes throughout, so tensors larger than 4 GiB work.
// Pure; thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_CHUNK_RUNS_H_
#define PLACEMENT_SERVER_TENSOR_CHUNK_RUNS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/region.h"
#include "server/device/device_backend.h"

namespace placement::server {

// Upper bound on the runs handed to one callback (24 bytes each).
inline constexpr size_t kMaxRunsPerBatch = size_t{1} << 16;

enum class RunDirection {
  kChunkToBox,  // src_offset: offset in the chunk; dst_offset: offset in the box buffer
  kBoxToChunk,  // src_offset: offset in the box buffer; dst_offset: offset in the chunk
};

// For the global byte range [begin, end) of a row-major array of `shape`
// (the chunk; chunk offset 0 is global byte `begin`), calls
// fn(box_index, runs) for every box in `boxes` that the range overlaps, with
// that box's runs in increasing order, in batches of at most
// kMaxRunsPerBatch. Stops at and returns the first error from `fn`.
// REQUIRES: every box lies inside FullBox(shape); elem_size > 0;
// 0 <= begin <= end <= the array's byte size. `scratch` is reused storage.
absl::Status ForEachChunkRunBatch(
    absl::Span<const int64_t> shape, int64_t elem_size, absl::Span<const Box> boxes, int64_t begin,
    int64_t end, RunDirection direction, std::vector<ByteRun>* scratch,
    absl::FunctionRef<absl::Status(size_t box_index, absl::Span<const ByteRun> runs)> fn);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_CHUNK_RUNS_H_
