// ClusterData: the bytes of shards that live on other daemons (RemoteShards
// for the tensor core, remote_shards.h) and the serving side of the same
// streams (PeerService.ReadBox / WriteShards):
//
//   OpenBox     ReadBox from the daemon holding a shard: one box, row-major,
//               in chunks of about 1 MiB (flow-controlled: O(chunk) memory on
//               both ends).
//   StartWrite  one WriteShards stream per other daemon holding shards of a
//               tensor being uploaded; Commit ends them (each daemon checks
//               its shards are complete and keeps them pending) and commits
//               the tensor everywhere (ClusterTensors::CommitEverywhere).
//   BoxSource / ShardSink   what the PeerService handler serves those
//               streams from / into.
//
// Thread-safe; each stream object belongs to one caller.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_DATA_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_DATA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_tensors.h"
#include "server/cluster/peer_transport.h"
#include "server/common/worker_pool.h"
#include "server/tensor/box_cursor.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// Serves one ReadBox: the chunks of a box of one of this daemon's shards.
class BoxSource {
 public:
  // NOT_FOUND for an unknown tensor or a device holding no shard of it
  // here; INVALID_ARGUMENT for a box outside that shard.
  static absl::StatusOr<std::unique_ptr<BoxSource>> Open(TensorStore* store,
                                                         const std::string& tensor_id,
                                                         int64_t device_id, const Box& box);
  // Fills `chunk` with the next bytes (at most `max_bytes`); empty at the end.
  absl::Status Next(int64_t max_bytes, std::string* chunk);
  bool done() const { return cursor_.done(); }

 private:
  BoxSource(std::shared_ptr<const Tensor> tensor, size_t shard, const Box& box,
            DeviceBackend* backend);
  std::shared_ptr<const Tensor> tensor_;
  size_t shard_;
  DeviceBackend* backend_;
  BoxCursor cursor_;
  std::vector<ByteRun> runs_;
};

// Receives one WriteShards stream: this daemon's shards of a tensor being
// uploaded through another daemon.
class ShardSink {
 public:
  // Allocates this daemon's shards of `record` (its quotas apply).
  static absl::StatusOr<std::unique_ptr<ShardSink>> Open(TensorStore* store, const Tensor& record);
  // Writes `runs` (src_offset: offset in `data`, dst_offset: offset in the
  // shard) into the shards of `device_ids`. INVALID_ARGUMENT for a device
  // without a shard here or runs outside the data or the shard.
  absl::Status Write(const std::vector<int64_t>& device_ids, absl::Span<const ByteRun> runs,
                     absl::string_view data);
  // INVALID_ARGUMENT unless every shard got exactly its bytes; then the
  // tensor, ready to be held pending.
  absl::StatusOr<std::unique_ptr<Tensor>> Finish();
  int64_t bytes_written() const { return written_; }

 private:
  ShardSink(TensorStore* store, std::unique_ptr<Tensor> tensor);
  TensorStore* store_;
  std::unique_ptr<Tensor> tensor_;
  std::vector<int64_t> received_;  // per shard
  int64_t written_ = 0;
};

class ClusterData final : public RemoteShards {
 public:
  // REQUIRES: every argument outlives this object.
  ClusterData(Cluster* cluster, TensorStore* store, ClusterTensors* tensors, PeerTransport* peers);
  ~ClusterData() override;  // waits for pending failure notices (bounded)

  absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenBox(const Tensor& tensor, const Shard& shard,
                                                           const Box& box) override;
  absl::StatusOr<std::unique_ptr<RemoteShardWriter>> StartWrite(const Tensor& tensor) override;
  std::string NewId() override { return store_->NewId(); }
  int32_t process_index() const override { return cluster_->process_index(); }
  int32_t ProcessOf(int64_t device_id) const override { return cluster_->ProcessOf(device_id); }
  // Multi-controller uploads meet at the coordinator barrier
  // "pl/<tenant>/<global_name>" among the processes holding the tensor's
  // devices; the id comes from the barrier's token; the lowest participant
  // records the tensor on the daemons without shards.
  absl::StatusOr<std::unique_ptr<ProcessLocalCommit>> BeginProcessLocal(
      const Tensor& tensor, const ProcessLocalRequest& request) override;

 private:
  Cluster* cluster_;
  TensorStore* store_;
  ClusterTensors* tensors_;
  PeerTransport* peers_;
  // Tells the other processes that this one's part failed, off the
  // caller's thread.
  std::unique_ptr<WorkerPool> notices_;
};

// A copy of `tensor` without buffers: its record (what every daemon holds).
std::unique_ptr<Tensor> RecordOf(const Tensor& tensor);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_DATA_H_
