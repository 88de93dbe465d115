#include "server/tensor/chunk_runs.h"

namespace placement::server {

absl::Status ForEachChunkRunBatch(
    absl::Span<const int64_t> shape, int64_t elem_size, absl::Span<const Box> boxes, int64_t begin,
    int64_t end, RunDirection direction, std::vector<ByteRun>* scratch,
    absl::FunctionRef<absl::Status(size_t box_index, absl::Span<const ByteRun> runs)> fn) {
  const bool to_box = direction == RunDirection::kChunkToBox;
  for (size_t i = 0; i < boxes.size(); ++i) {
    scratch->clear();
    absl::Status status;
    ForEachRunInByteRange(shape, boxes[i], elem_size, begin, end,
                          [&](int64_t global, int64_t box_offset, int64_t length) {
                            if (!status.ok()) return;
                            const int64_t chunk_offset = global - begin;
                            scratch->push_back(to_box ? ByteRun{chunk_offset, box_offset, length}
                                                      : ByteRun{box_offset, chunk_offset, length});
                            if (scratch->size() == kMaxRunsPerBatch) {
                              status = fn(i, *scratch);
                              scratch->clear();
                            }
                          });
    if (!status.ok()) return status;
    if (!scratch->empty()) {
      status = fn(i, *scratch);
      if (!status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server
