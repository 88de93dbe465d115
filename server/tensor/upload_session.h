// UploadSession: one tensor being uploaded. Every shard buffer is allocated
// up front (so an over-budget upload fails at the header, before any byte
// moves); each incoming chunk is scattered at once into every shard it
// touches, replicas included, so host memory stays O(chunk) whatever the
// tensor size. Commit checks the byte count and publishes the tensor.
//
// Nothing half-done survives: destroying or aborting a session that was not
// committed frees every byte it allocated.
//
// In a cluster, shards on other daemons' devices get their bytes through a
// RemoteShardWriter (remote_shards.h): each chunk's runs for those shards
// go to the daemon holding them (once per distinct box and daemon), and
// Commit commits the tensor on every daemon.
//
// Owned by one upload stream; not thread-safe (calls must be serialized,
// which gRPC's reactor callbacks are).
#ifndef PLACEMENT_SERVER_TENSOR_UPLOAD_SESSION_H_
#define PLACEMENT_SERVER_TENSOR_UPLOAD_SESSION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/process_local.h"
#include "common/region.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

class UploadSession {
 public:
  // Validates the shape against the dtype and the sharding, then allocates
  // every shard. INVALID_ARGUMENT: bad shape, spec, or a partial sharding
  // (uploads carry the whole value; build partial tensors with Assemble).
  // RESOURCE_EXHAUSTED: a device budget or the owner's quota (nothing kept).
  // NOT_FOUND: a device the backend lacks.
  // REQUIRES: store outlives the session.
  // `remote` is needed when the target has devices of other daemons
  // (FAILED_PRECONDITION otherwise).
  static absl::StatusOr<std::unique_ptr<UploadSession>> Start(TensorStore* store, TensorSpec spec,
                                                              ResolvedSharding target,
                                                              RemoteShards* remote = nullptr);

  // A multi-controller upload: the stream carries this process's local data
  // (`layout.local_shape`), which lands in this daemon's shards of the
  // global tensor (spec.shape = the global shape) as `layout` says; Commit
  // meets the other processes through `commit`.
  static absl::StatusOr<std::unique_ptr<UploadSession>> StartProcessLocal(
      TensorStore* store, TensorSpec spec, ResolvedSharding target, const LocalDataLayout& layout,
      RemoteShards* remote, const ProcessLocalRequest& request);
  ~UploadSession();

  UploadSession(const UploadSession&) = delete;
  UploadSession& operator=(const UploadSession&) = delete;

  int64_t expected_bytes() const { return expected_bytes_; }
  int64_t received_bytes() const { return received_bytes_; }
  const Tensor& tensor() const { return *tensor_; }

  // Appends `bytes` to the stream and writes them into every shard they
  // touch. INVALID_ARGUMENT when the stream would exceed the tensor's size
  // ("expected 4096 bytes for f32[32,32], got at least 4100"); the session is
  // aborted then. FAILED_PRECONDITION after Commit or Abort.
  absl::Status Write(absl::string_view bytes);

  // OK when exactly expected_bytes() arrived; INVALID_ARGUMENT otherwise
  // ("expected 4096 bytes for f32[32,32], got 4000"). `label` (e.g.
  // "array 'images'") is added to the message when non-empty.
  absl::Status CheckComplete(absl::string_view label = "") const;

  // CheckComplete, then publishes the tensor in the store. On error the
  // session is aborted.
  absl::StatusOr<std::shared_ptr<const Tensor>> Commit();

  // Commit of a tensor whose shard memory another process wrote in place
  // (server/view/upload_reservations.h): the bytes count as arrived.
  // FAILED_PRECONDITION once a byte came through Write.
  absl::StatusOr<std::shared_ptr<const Tensor>> CommitWrittenInPlace();

  // Frees everything now; later calls fail with FAILED_PRECONDITION.
  void Abort();

 private:
  UploadSession(TensorStore* store, std::unique_ptr<Tensor> tensor,
                std::unique_ptr<RemoteShardWriter> writer);
  UploadSession(TensorStore* store, std::unique_ptr<Tensor> tensor, const LocalDataLayout& layout,
                std::unique_ptr<ProcessLocalCommit> commit);

  // Where a box's bytes go: a local shard, or the devices of another
  // daemon holding that box.
  struct Target {
    int64_t shard = -1;  // local shard index, or -1
    int32_t process = -1;
    std::vector<int64_t> device_ids;
  };

  TensorStore* store_;
  std::unique_ptr<Tensor> tensor_;                     // null once committed or aborted
  std::unique_ptr<RemoteShardWriter> writer_;          // null for a tensor of this daemon alone
  std::unique_ptr<ProcessLocalCommit> process_local_;  // multi-controller uploads
  Shape stream_shape_;      // the streamed array: the tensor, or this process's local data
  std::vector<Box> boxes_;  // one per target
  std::vector<Target> targets_;
  int64_t expected_bytes_ = 0;
  int64_t received_bytes_ = 0;
  std::vector<ByteRun> scratch_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_UPLOAD_SESSION_H_
