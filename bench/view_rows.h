// tensor_transfer_bench's shard view rows (docs/api/views.md): the time to a
// readable view from 1 MiB to --view_max_mib, and a view plus one full read
// of the bytes against a region download plus the same read and a gRPC
// download plus the same read, all in the same run.
#ifndef PLACEMENT_BENCH_VIEW_ROWS_H_
#define PLACEMENT_BENCH_VIEW_ROWS_H_

#include <cstdint>

#include "placement/client/placement.h"

namespace placement::bench {

struct ViewRowsInput {
  const client::Client* client = nullptr;
  const client::Mesh* mesh = nullptr;  // P('data') over every device
  int64_t bytes = 0;                   // the read rows' tensor
  int64_t max_view_bytes = 0;          // the time-to-view sweep's largest
  int reps = 5;
};

// Prints the rows; false (after a message on stderr) when a call failed.
bool RunViewRows(const ViewRowsInput& input);

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_VIEW_ROWS_H_
