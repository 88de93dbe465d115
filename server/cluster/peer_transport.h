// PeerTransport: the calls a daemon makes to the other daemons of its
// cluster, by process index, as the cluster layer needs them -- devices,
// meshes, the two phases of cross-daemon tensor operations (Prepare*, then
// Commit or Abort), record listing, and the two byte streams (a box of
// another daemon's shard; shards written to another daemon). The cluster
// layer depends only on this interface; server/peer/peer_client.h
// implements it over gRPC (PeerService).
//
// Errors: a call cut short because membership lost the process reads
// "process 1 (HOST:PORT) is lost (epoch 4)" (UNAVAILABLE); other transport
// failures are UNAVAILABLE naming the process (DEADLINE_EXCEEDED "did not
// answer in time"); the peer's own errors keep their codes and text.
//
// Thread-safe; each stream belongs to one caller.
#ifndef PLACEMENT_SERVER_CLUSTER_PEER_TRANSPORT_H_
#define PLACEMENT_SERVER_CLUSTER_PEER_TRANSPORT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/region.h"
#include "server/collective/collective_engine.h"
#include "server/collective/collective_request.h"
#include "server/device/device_inventory.h"
#include "server/mesh/mesh_registry.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"

namespace placement::server {

// Shards written to another daemon: the tensor's record went at open; each
// Write carries runs for the shards of some devices; Finish leaves them
// pending there.
class PeerShardWriter {
 public:
  virtual ~PeerShardWriter() = default;
  // `runs` (src_offset into `chunk`, dst_offset into the shard) for the
  // shards of `device_ids`.
  virtual absl::Status Write(absl::Span<const int64_t> device_ids, absl::Span<const ByteRun> runs,
                             const char* chunk) = 0;
  // Ends the stream; OK when the daemon holds its shards complete (pending).
  virtual absl::Status Finish() = 0;
  // Cancels the stream; the daemon frees what it allocated.
  virtual void Cancel() = 0;
};

class PeerTransport {
 public:
  virtual ~PeerTransport() = default;

  // `process`'s devices with their live accounting.
  virtual absl::StatusOr<std::vector<DeviceState>> GetLocalDevices(int32_t process,
                                                                   absl::Duration timeout) = 0;
  virtual absl::Status InstallMesh(int32_t process, const RegisteredMesh& mesh) = 0;
  // The number of tensors deleted with the mesh (force).
  virtual absl::StatusOr<int64_t> RemoveMesh(int32_t process, const std::string& mesh_id,
                                             bool force) = 0;

  // Installs the records of `tensors` (pending shards become theirs) and
  // deletes `delete_ids`, in one step.
  virtual absl::Status Commit(int32_t process, const std::vector<const Tensor*>& tensors,
                              const std::vector<std::string>& delete_ids) = 0;
  virtual absl::Status Abort(int32_t process, const std::vector<std::string>& ids) = 0;
  // Bytes freed.
  virtual absl::StatusOr<int64_t> DeleteTensors(int32_t process,
                                                const std::vector<std::string>& ids) = 0;

  // Asynchronous forms of the calls a daemon fans out to many peers at
  // once (FanOutCall / FanOutAsync, fan_out.h) -- record commits, aborts
  // and deletes, mesh installs and removals, the Prepare of a Place,
  // Assemble, Disassemble or collective, and the devices' accounting -- so
  // a fan-out holds no thread per peer. Each starts the call and returns it
  // as a PendingCall, which owns the call (its context, deadline and loss
  // guard); `done` runs exactly once with the call's result (a status only,
  // where the fan-outs need no more), and must only record
  // and signal. It runs on a transport thread, inline (before Start*
  // returns), or inside PendingCall::Wait on the waiting thread.
  // REQUIRES: the PendingCall is waited for (Wait) before it is destroyed.
  class PendingCall {
   public:
    virtual ~PendingCall() = default;
    // Returns once `done` ran, or (for a transport that completes calls
    // on threads of its own) at once; the waiter then waits for `done`
    // itself. PeerClient completes each call on its own completion queue
    // here, on the waiting thread, so a waiter needs no transport thread
    // and may be a gRPC callback thread.
    virtual void Wait() {}
  };
  using Done = std::function<void(absl::Status)>;
  using RecordsDone = std::function<void(absl::StatusOr<std::vector<std::unique_ptr<Tensor>>>)>;
  using DevicesDone = std::function<void(absl::StatusOr<std::vector<DeviceState>>)>;
  virtual std::unique_ptr<PendingCall> StartGetLocalDevices(int32_t process, absl::Duration timeout,
                                                            DevicesDone done) = 0;
  virtual std::unique_ptr<PendingCall> StartInstallMesh(int32_t process, const RegisteredMesh& mesh,
                                                        Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartRemoveMesh(int32_t process, const std::string& mesh_id,
                                                       bool force, Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartCommit(int32_t process,
                                                   const std::vector<const Tensor*>& tensors,
                                                   const std::vector<std::string>& delete_ids,
                                                   Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartAbort(int32_t process,
                                                  const std::vector<std::string>& ids,
                                                  Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartDeleteTensors(int32_t process,
                                                          const std::vector<std::string>& ids,
                                                          Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartPreparePlace(int32_t process,
                                                         const std::string& source_id,
                                                         const Tensor& result, Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartPrepareAssemble(
      int32_t process, const std::vector<std::string>& piece_ids, const Tensor& result, bool donate,
      Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartPrepareDisassemble(
      int32_t process, const std::string& source_id, const std::vector<std::string>& result_ids,
      bool donate, Done done) = 0;
  virtual std::unique_ptr<PendingCall> StartPrepareCollective(
      int32_t process, const CollectiveRequest& request, const std::string& op_key,
      const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
      const CrossProcessTicket& ticket, RecordsDone done) = 0;

  // Every record `process` holds, as tensor shells (no buffers).
  virtual absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> ListTensorRecords(
      int32_t process) = 0;

  // The bytes of `box` of `tensor_id`'s shard on `device_id`, held by
  // `process`, bounded by `timeout`.
  virtual absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenBox(int32_t process,
                                                                   const std::string& tensor_id,
                                                                   int64_t device_id,
                                                                   const Box& box,
                                                                   absl::Duration timeout) = 0;
  // Shards of `record` written to `process`, held there pending (for the
  // driver, this process) up to `pending_lifetime`.
  virtual absl::StatusOr<std::unique_ptr<PeerShardWriter>> OpenShardWriter(
      int32_t process, const Tensor& record, absl::Duration pending_lifetime,
      absl::Duration timeout) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_PEER_TRANSPORT_H_
