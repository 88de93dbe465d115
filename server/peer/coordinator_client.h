// CoordinatorClient: the gRPC implementation of CoordinatorApi
// (server/cluster/coordinator_api.h): a daemon's calls to its cluster's
// coordinator (ClusterService on process 0's peer address) -- join,
// heartbeat, leave, the key-value store (also the RendezvousStore through
// which cross-process transports connect), barriers and the mesh registry.
//
// Errors keep the coordinator's codes; an unreachable coordinator is
// UNAVAILABLE "coordinator at HOST:PORT: ...". Process 0 calls its own
// coordinator through the same path (loopback), so every daemon behaves
// alike.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PEER_COORDINATOR_CLIENT_H_
#define PLACEMENT_SERVER_PEER_COORDINATOR_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cluster/coordinator_api.h"
#include "server/peer/peer_channels.h"

namespace placement::server {

class CoordinatorClient final : public CoordinatorApi {
 public:
  // REQUIRES: `channels` outlives the client.
  CoordinatorClient(PeerChannels* channels, std::string address);
  ~CoordinatorClient() override;

  const std::string& address() const override { return address_; }

  absl::StatusOr<ClusterView> Join(const JoinInfo& info, absl::Duration timeout) override;
  absl::StatusOr<ClusterView> Heartbeat(int32_t process_index, const std::string& instance_id,
                                        int64_t epoch, absl::Duration timeout) override;
  absl::Status Leave(int32_t process_index, const std::string& instance_id) override;
  absl::StatusOr<ClusterView> Topology(absl::Duration timeout) override;

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

  absl::StatusOr<BarrierResult> Barrier(const BarrierArrival& arrival) override;
  absl::StatusOr<int64_t> ReportContextFailure(const std::string& sequence_key, int64_t generation,
                                               const std::string& reason) override;

  absl::StatusOr<RegisteredMesh> CreateMesh(const std::string& tenant, const std::string& mesh_id,
                                            const std::vector<MeshAxis>& axes,
                                            const std::vector<int64_t>& device_ids) override;
  absl::StatusOr<int64_t> DeleteMesh(const std::string& mesh_id, const std::string& tenant,
                                     bool admin, bool force) override;
  absl::StatusOr<std::vector<RegisteredMesh>> ListMeshes() override;

 private:
  struct Stub;
  PeerChannels* channels_;
  std::string address_;
  std::unique_ptr<Stub> stub_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_COORDINATOR_CLIENT_H_
