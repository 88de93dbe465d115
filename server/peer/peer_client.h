// PeerClient: the gRPC implementation of PeerTransport
// (server/cluster/peer_transport.h) -- a daemon's calls to the PeerService
// of the other daemons of its cluster (peer_service.proto), by process
// index, over PeerChannels (the daemon's TLS and token). Every call
// registers with Cluster::CallGuard, so it is cancelled when membership
// loses that process; its error then reads "process 1 (HOST:PORT) is lost
// (epoch 4)" (UNAVAILABLE) rather than gRPC's CANCELLED. Other transport
// failures are UNAVAILABLE naming the process; the peer's own errors keep
// their codes.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PEER_PEER_CLIENT_H_
#define PLACEMENT_SERVER_PEER_PEER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cluster/cluster.h"
#include "server/cluster/peer_transport.h"
#include "server/peer/peer_channels.h"

namespace placement::server {

class PeerClient final : public PeerTransport {
 public:
  // REQUIRES: channels and cluster outlive the client.
  PeerClient(PeerChannels* channels, Cluster* cluster) : channels_(channels), cluster_(cluster) {}

  absl::StatusOr<std::vector<DeviceState>> GetLocalDevices(int32_t process,
                                                           absl::Duration timeout) override;
  absl::Status InstallMesh(int32_t process, const RegisteredMesh& mesh) override;
  absl::StatusOr<int64_t> RemoveMesh(int32_t process, const std::string& mesh_id,
                                     bool force) override;
  absl::Status Commit(int32_t process, const std::vector<const Tensor*>& tensors,
                      const std::vector<std::string>& delete_ids) override;
  absl::Status Abort(int32_t process, const std::vector<std::string>& ids) override;
  absl::StatusOr<int64_t> DeleteTensors(int32_t process,
                                        const std::vector<std::string>& ids) override;
  // The asynchronous forms complete on the waiting thread, in
  // PendingCall::Wait (peer_unary_call.h); the blocking forms are the same
  // calls, waited for at once.
  std::unique_ptr<PendingCall> StartGetLocalDevices(int32_t process, absl::Duration timeout,
                                                    DevicesDone done) override;
  std::unique_ptr<PendingCall> StartInstallMesh(int32_t process, const RegisteredMesh& mesh,
                                                Done done) override;
  std::unique_ptr<PendingCall> StartRemoveMesh(int32_t process, const std::string& mesh_id,
                                               bool force, Done done) override;
  std::unique_ptr<PendingCall> StartCommit(int32_t process,
                                           const std::vector<const Tensor*>& tensors,
                                           const std::vector<std::string>& delete_ids,
                                           Done done) override;
  std::unique_ptr<PendingCall> StartAbort(int32_t process, const std::vector<std::string>& ids,
                                          Done done) override;
  std::unique_ptr<PendingCall> StartDeleteTensors(int32_t process,
                                                  const std::vector<std::string>& ids,
                                                  Done done) override;
  std::unique_ptr<PendingCall> StartPreparePlace(int32_t process, const std::string& source_id,
                                                 const Tensor& result, Done done) override;
  std::unique_ptr<PendingCall> StartPrepareAssemble(int32_t process,
                                                    const std::vector<std::string>& piece_ids,
                                                    const Tensor& result, bool donate,
                                                    Done done) override;
  std::unique_ptr<PendingCall> StartPrepareDisassemble(int32_t process,
                                                       const std::string& source_id,
                                                       const std::vector<std::string>& result_ids,
                                                       bool donate, Done done) override;
  std::unique_ptr<PendingCall> StartPrepareCollective(
      int32_t process, const CollectiveRequest& request, const std::string& op_key,
      const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
      const CrossProcessTicket& ticket, RecordsDone done) override;
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> ListTensorRecords(int32_t process) override;
  absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenBox(int32_t process,
                                                           const std::string& tensor_id,
                                                           int64_t device_id, const Box& box,
                                                           absl::Duration timeout) override;
  absl::StatusOr<std::unique_ptr<PeerShardWriter>> OpenShardWriter(int32_t process,
                                                                   const Tensor& record,
                                                                   absl::Duration pending_lifetime,
                                                                   absl::Duration timeout) override;

 private:
  PeerChannels* channels_;
  Cluster* cluster_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_CLIENT_H_
