// PeerClient: a daemon's calls to the PeerService of the other daemons of
// its cluster (peer_service.proto), by process index. Every call registers
// with Cluster::CallGuard, so it is cancelled when membership loses that
// process; its error then reads "process 1 (HOST:PORT) is lost (epoch 4)"
// (UNAVAILABLE) rather than gRPC's CANCELLED. Other transport failures are
// UNAVAILABLE naming the process; the peer's own errors keep their codes.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_PEER_PEER_CLIENT_H_
#define PLACEMENT_SERVER_PEER_PEER_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/cluster/cluster.h"
#include "server/collective/collective_engine.h"
#include "server/device/device_inventory.h"
#include "server/mesh/mesh_registry.h"
#include "server/peer/peer_caller.h"
#include "server/tensor/tensor.h"

namespace placement::v1 {
class CollectiveOp;
class PeerService;
class TensorRecord;
}  // namespace placement::v1

namespace placement::server {

class PeerClient {
 public:
  // REQUIRES: cluster outlives the client.
  explicit PeerClient(Cluster* cluster) : cluster_(cluster) {}

  Cluster* cluster() const { return cluster_; }

  absl::StatusOr<std::vector<DeviceState>> GetLocalDevices(int32_t process, absl::Duration timeout);
  absl::Status InstallMesh(int32_t process, const RegisteredMesh& mesh);
  absl::StatusOr<int64_t> RemoveMesh(int32_t process, const std::string& mesh_id, bool force);
  // Installs the records of `tensors` (pending shards become theirs) and
  // deletes `delete_ids`, in one step.
  absl::Status Commit(int32_t process, const std::vector<const Tensor*>& tensors,
                      const std::vector<std::string>& delete_ids);
  absl::Status Abort(int32_t process, const std::vector<std::string>& ids);
  absl::StatusOr<int64_t> DeleteTensors(int32_t process, const std::vector<std::string>& ids);
  // Phase one of an operation this daemon drives (PeerService.Prepare):
  // `process` makes its shards of the result(s) and holds them pending.
  absl::Status PreparePlace(int32_t process, const std::string& source_id, const Tensor& result);
  absl::Status PrepareAssemble(int32_t process, const std::vector<std::string>& piece_ids,
                               const Tensor& result, bool donate);
  absl::Status PrepareDisassemble(int32_t process, const std::string& source_id,
                                  const std::vector<std::string>& result_ids, bool donate);

  // `process`'s part of the collective `op` (PeerService.Prepare): its
  // results pending under `result_ids`; their records.
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> PrepareCollective(
      int32_t process, const placement::v1::CollectiveOp& op, const std::string& op_key,
      const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
      const CrossProcessTicket& ticket);

  // Every record `process` holds, as tensor shells (no buffers).
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> ListTensorRecords(int32_t process);

  // Runs fn(p) for every process in `processes` on threads of its own and,
  // every call finished, returns the first error (by process order) that
  // is not a consequence of another's (IsConsequence), else the first that
  // could not reach its process (IsUnreachable, peer_call.h), else the
  // first.
  // Whether `status` is what a process sees when a peer failed or vanished
  // (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, ABORTED) rather than a
  // failure of its own (INVALID_ARGUMENT, RESOURCE_EXHAUSTED, ...).
  static bool IsConsequence(const absl::Status& status);

  static absl::Status ForEach(const std::vector<int32_t>& processes,
                              const std::function<absl::Status(int32_t)>& fn);
  // The alive processes other than this daemon.
  std::vector<int32_t> AlivePeers() const;

  // Internals shared with the streaming calls (peer_streams.cc).
  struct Call;

 private:
  Cluster* cluster_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_CLIENT_H_
