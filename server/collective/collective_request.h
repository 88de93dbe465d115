// CollectiveRequest: one collective as a caller asks for it -- any of
// CollectiveService's five requests in core types (no placement.v1 type
// reaches the core; server/convert/collective_request_proto.h converts at
// the gRPC edges). What the collective core runs
// (CollectiveServiceCore::Run), what a daemon hands the others when a
// collective spans daemons (PeerTransport::PrepareCollective), and what
// multi-controller participants compare (Encode).
//
// Plain value; thread-compatible.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_REQUEST_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/reduce_op.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

enum class CollectiveRequestKind {
  kAllReduce,
  kAllReduceBatch,
  kAllGather,
  kReduceScatter,
  kBroadcast,
};

// Who asks (JAX's single- vs multi-controller): one call on any daemon
// (single), or the same call made by every participant's trainer on its own
// daemon (multi). On a lone daemon both mean the same.
enum class Controller {
  kSingle,
  kMulti,
};

struct CollectiveRequest {
  CollectiveRequestKind kind = CollectiveRequestKind::kAllReduce;
  // The input: one tensor, or the batch's (kAllReduceBatch).
  std::vector<std::string> tensor_ids;
  std::vector<std::string> axes;  // empty: see collective_plan.h per collective
  // Reductions: unset = the input's partial_op, else SUM.
  std::optional<ReduceOp> op;
  SourceHandling source = SourceHandling::kKeep;
  // The result's name (not for batches); empty keeps the input's.
  std::string name;
  // kAllGather: the dimension gathered; kReduceScatter: the dimension
  // scattered.
  int64_t dim = 0;
  // kBroadcast: the device whose shard is broadcast.
  int64_t root_device_id = 0;
  Controller controller = Controller::kSingle;

  // "all_reduce", "all_reduce_batch", "all_gather", "reduce_scatter",
  // "broadcast".
  absl::string_view KindName() const;
  // The request's fields in one canonical byte string: two requests encode
  // alike exactly when they ask for the same collective (multi-controller
  // participants compare these).
  std::string Encode() const;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_REQUEST_H_
