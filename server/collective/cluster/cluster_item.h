// How one CollectiveItem maps onto the processes of a cluster: which
// processes its group spans (the "subset"), which ranks each of them holds,
// and this process's contributions -- checked against the size table of
// collective_engine.h before anything moves.
//
// Worked example: group {1024, 0, 1, 2048} (device ids; process = id / 1024)
// seen from process 0 with local ranks 2 and 1:
//   processes = {0, 1, 2}, position = 0,
//   ranks_by_position = {{1, 2}, {0}, {3}}, local = ranks 1, 2 (rank order).
// A broadcast from root 3 has root_position 2.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ITEM_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ITEM_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/collective/collective_engine.h"

namespace placement::server {

struct ClusterItemPlan {
  int64_t ranks = 0;  // n, the group size
  int64_t block = 0;  // B, bytes per rank and block (collective_engine.h)
  // The distinct processes of the group's devices, ascending.
  std::vector<int32_t> processes;
  // This process's index in `processes` (its Gloo rank in the subset).
  int32_t position = 0;
  // ranks_by_position[q]: the group ranks held by processes[q], ascending.
  std::vector<std::vector<int32_t>> ranks_by_position;
  // This process's contributions, in rank order.
  std::vector<RankBuffers> local;
  // Broadcast: the index in `processes` of the root rank's process.
  int32_t root_position = 0;

  // Whether the group reaches beyond this process.
  bool spans() const { return processes.size() > 1; }
};

// Maps device ids to the index of the process that owns them (negative for
// an unknown device).
using ProcessOfDevice = std::function<int32_t(int64_t device_id)>;

// Checks `item` as seen from process `process_index` and plans it.
// INVALID_ARGUMENT, prefixed with `where` ("all_reduce item 2"), for: an
// empty group; a device of no process; a group with no rank on this
// process; a local rank outside [0, n), listed twice, or whose group device
// is on another process; a rank of this process without a contribution; a
// recv that is null or on another device than its rank's group device; a
// missing send; sizes off the table or not whole elements; bool for a
// reduction; a broadcast root outside [0, n); an all-gather or
// reduce-scatter recv that is also a send.
absl::StatusOr<ClusterItemPlan> PlanClusterItem(CollectiveKind kind, const CollectiveItem& item,
                                                int32_t process_index,
                                                const ProcessOfDevice& process_of,
                                                absl::string_view where);

// "0,1,3": the processes joined by commas (set keys, rendezvous prefixes).
std::string ProcessListKey(absl::Span<const int32_t> processes);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ITEM_H_
