// RemoteShards: how the tensor core reaches shards held by other daemons of
// a cluster (docs/cluster.md) -- streaming one box of a remote shard in
// (downloads, reshards) and streaming bytes out to the shards of other
// daemons (uploads). Implemented by the cluster layer over PeerService
// (server/cluster/cluster_data.h); a lone daemon has none, and the core
// then never meets a shard without a buffer.
//
// Thread-safe; the streams it opens are owned by one caller each.
#ifndef PLACEMENT_SERVER_TENSOR_REMOTE_SHARDS_H_
#define PLACEMENT_SERVER_TENSOR_REMOTE_SHARDS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/region.h"
#include "server/device/device_backend.h"
#include "server/tensor/tensor.h"

namespace placement::server {

// One box of a remote shard, arriving in row-major order.
class RemoteBoxStream {
 public:
  virtual ~RemoteBoxStream() = default;
  // Copies the next `length` bytes of the box into `dst`. UNAVAILABLE (the
  // daemon is lost or unreachable), the remote daemon's own errors, or
  // INTERNAL when the stream ends short.
  virtual absl::Status Read(char* dst, int64_t length) = 0;
};

// The remote part of one upload: a stream to every other daemon holding
// shards of the tensor, which prepares them as a pending tensor.
class RemoteShardWriter {
 public:
  virtual ~RemoteShardWriter() = default;
  // Writes `runs` (src_offset: offset in `chunk`; dst_offset: offset in the
  // shard buffer) into the shards of `device_ids`, devices of `process`
  // holding the same box.
  virtual absl::Status Write(int32_t process, absl::Span<const int64_t> device_ids,
                             absl::Span<const ByteRun> runs, const char* chunk) = 0;
  // Ends the streams (every daemon checks its shards are complete) and
  // commits the tensor everywhere; `local_part` holds this daemon's shards.
  // On error nothing is kept anywhere.
  virtual absl::StatusOr<std::shared_ptr<const Tensor>> Commit(
      std::unique_ptr<Tensor> local_part) = 0;
  // Frees what the other daemons prepared. Idempotent.
  virtual void Abort() = 0;
};

// A multi-controller upload (JAX make_array_from_process_local_data):
// what every process's call names in common, and how its commit meets the
// others.
struct ProcessLocalRequest {
  std::string global_name;
  std::string tenant;
  absl::Duration timeout = absl::Seconds(60);
};

class ProcessLocalCommit {
 public:
  virtual ~ProcessLocalCommit() = default;
  // Waits for every process holding devices of the tensor to commit its
  // part of the same global tensor, checks they agree (dtype, global shape,
  // sharding: INVALID_ARGUMENT naming both processes otherwise), and makes
  // the tensor visible on every daemon under one id.
  virtual absl::StatusOr<std::shared_ptr<const Tensor>> Commit(
      std::unique_ptr<Tensor> local_part) = 0;
  // This process's part failed: the others' commits fail at once with `why`
  // instead of waiting for their timeout. Idempotent; no-op after Commit.
  virtual void Abort(const absl::Status& why) = 0;
};

class RemoteShards {
 public:
  virtual ~RemoteShards() = default;
  // This daemon's process index and the process owning a device.
  virtual int32_t process_index() const = 0;
  virtual int32_t ProcessOf(int64_t device_id) const = 0;
  // The commit of this process's part of a multi-controller upload of
  // `tensor` (allocated here: this daemon's shards).
  virtual absl::StatusOr<std::unique_ptr<ProcessLocalCommit>> BeginProcessLocal(
      const Tensor& tensor, const ProcessLocalRequest& request) = 0;
  // Streams `box` (inside `shard`'s box) of `tensor`'s shard held by
  // another daemon.
  virtual absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenBox(const Tensor& tensor,
                                                                   const Shard& shard,
                                                                   const Box& box) = 0;
  // Opens the upload streams for `tensor` (id chosen, this daemon's shards
  // allocated): every other daemon holding shards allocates its own.
  virtual absl::StatusOr<std::unique_ptr<RemoteShardWriter>> StartWrite(const Tensor& tensor) = 0;
  // A fresh tensor id for a tensor built on several daemons.
  virtual std::string NewId() = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_REMOTE_SHARDS_H_
