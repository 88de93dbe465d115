// A collective request (any of CollectiveService's, as the CollectiveOp
// union of peer_service.proto) turned into core calls: what the
// CollectiveService handler runs for a caller, and what a daemon runs for
// its part of a collective another daemon drives (PeerService.Prepare) or
// that every daemon's trainer asked for (multi-controller).
//
//   RunCollectiveOp   the CollectiveServiceCore call on this daemon's shards
//   ExecuteCollective the whole request: on this daemon alone, or -- for
//                     inputs whose shards span daemons, or controller MULTI --
//                     through ClusterCollectives (single: drive the others;
//                     multi: meet them)
//
// Pure glue; thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_COLLECTIVE_REQUESTS_H_
#define PLACEMENT_SERVER_SERVICE_COLLECTIVE_REQUESTS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/v1/peer_service.pb.h"
#include "server/auth/caller.h"
#include "server/collective/collective_service_core.h"

namespace placement::server {

class ClusterCollectives;
class PeerClient;

// The input ids of `op` (one, or the batch's).
std::vector<std::string> CollectiveInputs(const placement::v1::CollectiveOp& op);

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> RunCollectiveOp(
    const CollectiveServiceCore& core, const placement::v1::CollectiveOp& op,
    const CollectiveContext& context, const CollectiveCommit* commit);

// `cluster` and `peers` are null for a lone daemon.
absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> ExecuteCollective(
    const CollectiveServiceCore& core, ClusterCollectives* cluster, PeerClient* peers,
    const Caller& caller, const placement::v1::CollectiveOp& op, const CollectiveContext& context);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_COLLECTIVE_REQUESTS_H_
