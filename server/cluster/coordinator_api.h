// CoordinatorApi: what a daemon asks of its cluster's coordinator (process
// 0), as the cluster layer needs it: join, heartbeat and leave, the
// key-value store (also the RendezvousStore through which cross-process
// transports connect), barriers, context failures and the mesh registry.
// The cluster layer depends only on this interface; server/peer/
// coordinator_client.h implements it over gRPC (ClusterService), and process
// 0 calls its own coordinator through the same path.
//
// Errors keep the coordinator's codes (Membership::Join, BarrierTable,
// KvStore); an unreachable coordinator is UNAVAILABLE "coordinator at
// HOST:PORT: ..." (DEADLINE_EXCEEDED when a call ran out of time).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_COORDINATOR_API_H_
#define PLACEMENT_SERVER_CLUSTER_COORDINATOR_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cluster/barrier_table.h"
#include "server/cluster/cluster_view.h"
#include "server/cluster/membership.h"
#include "server/collective/transport/rendezvous_store.h"
#include "server/mesh/mesh_registry.h"

namespace placement::server {

class CoordinatorApi : public RendezvousStore {
 public:
  ~CoordinatorApi() override = default;

  // host:port of the coordinator, for messages.
  virtual const std::string& address() const = 0;

  // Blocks up to `timeout` for the cluster to form.
  virtual absl::StatusOr<ClusterView> Join(const JoinInfo& info, absl::Duration timeout) = 0;
  // This process is alive; the answer is the coordinator's view, without
  // `processes` when `epoch` (the caller's) is current. NOT_FOUND when the
  // coordinator no longer counts this instance as a member.
  virtual absl::StatusOr<ClusterView> Heartbeat(int32_t process_index,
                                                const std::string& instance_id, int64_t epoch,
                                                absl::Duration timeout) = 0;
  // This process is going (draining).
  virtual absl::Status Leave(int32_t process_index, const std::string& instance_id) = 0;
  virtual absl::StatusOr<ClusterView> Topology(absl::Duration timeout) = 0;

  // Waits for every participant of the barrier (BarrierTable::Arrive).
  virtual absl::StatusOr<BarrierResult> Barrier(const BarrierArrival& arrival) = 0;
  // A collective context of `sequence_key` failed at `generation`; the
  // answer is the set's generation from now on.
  virtual absl::StatusOr<int64_t> ReportContextFailure(const std::string& sequence_key,
                                                       int64_t generation,
                                                       const std::string& reason) = 0;

  // The cluster's mesh registry.
  virtual absl::StatusOr<RegisteredMesh> CreateMesh(const std::string& tenant,
                                                    const std::string& mesh_id,
                                                    const std::vector<MeshAxis>& axes,
                                                    const std::vector<int64_t>& device_ids) = 0;
  virtual absl::StatusOr<int64_t> DeleteMesh(const std::string& mesh_id, const std::string& tenant,
                                             bool admin, bool force) = 0;
  virtual absl::StatusOr<std::vector<RegisteredMesh>> ListMeshes() = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_COORDINATOR_API_H_
