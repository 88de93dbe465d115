// DistributedCollectives: collectives whose inputs have shards on other
// daemons of a cluster, or that every participant's trainer asks for on its
// own daemon (Controller::kMulti), as the collective core hands them over
// (CollectiveServiceCore::Execute) -- the collective counterpart of
// server/tensor/remote_shards.h and distributed_ops.h. Implemented by
// server/cluster/cluster_collectives.h; a lone daemon has none and runs
// every request itself.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_DISTRIBUTED_COLLECTIVES_H_
#define PLACEMENT_SERVER_COLLECTIVE_DISTRIBUTED_COLLECTIVES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/collective/collective_engine.h"
#include "server/collective/collective_request.h"
#include "server/tensor/tensor.h"

namespace placement::server {

class DistributedCollectives {
 public:
  virtual ~DistributedCollectives() = default;

  // Runs `request` for `tenant`: on this daemon alone when its inputs are
  // all here and it is single-controller, else with the daemons that hold
  // shards of the inputs (drives them, or meets them for kMulti). The
  // results, committed on every daemon that holds a shard of them. Errors as
  // CollectiveServiceCore's, and UNAVAILABLE naming a lost daemon.
  virtual absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Execute(
      const CollectiveRequest& request, const std::string& tenant,
      const CollectiveContext& context) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_DISTRIBUTED_COLLECTIVES_H_
