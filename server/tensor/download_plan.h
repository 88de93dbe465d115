// DownloadPlan: what a Download streams and where each byte comes from.
//
//   kWhole      the global array in row-major order, gathered chunk by chunk
//               from the replica-0 shards (which tile the array exactly, padded
//               mode included). Tensors with partial axes have no single value
//               to gather: FAILED_PRECONDITION.
//   kDevice     that device's shard, raw (replica or not).
//   kDeviceSet  the distinct shards (by box and partial index) held by the
//   kProcess    given devices / by the devices of one process (node), in index
//               order (boxes compared lexicographically by their begins, then
//               partial index), their bytes one after the other.
//
// shape(): the whole array's shape; one piece's shard shape; for several
// pieces, their concatenation along dimension 0 when they agree on every
// other dimension (loadax global_to_host_array: "this host's rows
// concatenated in index order"), else the flat [total elements].
//
// Host memory is O(chunk): Read copies straight from the shard buffers into
// the caller's chunk. The plan keeps the tensor alive (a concurrent Delete
// frees its memory when the plan goes away).
//
// In a cluster a box may be on another daemon only: the plan then streams
// it from that daemon (RemoteShards::OpenBox) -- only the boxes it needs,
// each once, in order -- preferring a replica on this daemon when there is
// one. Reads must then come in order (each starting where the last ended).
//
// Not thread-safe (one stream owns it).
#ifndef PLACEMENT_SERVER_TENSOR_DOWNLOAD_PLAN_H_
#define PLACEMENT_SERVER_TENSOR_DOWNLOAD_PLAN_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "common/region.h"
#include "common/sharding.h"
#include "server/device/device_backend.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"

namespace placement::server {

enum class DownloadSelectionKind { kWhole, kDevice, kDeviceSet, kProcess };

struct DownloadSelection {
  DownloadSelectionKind kind = DownloadSelectionKind::kWhole;
  int64_t device_id = 0;            // kDevice
  std::vector<int64_t> device_ids;  // kDeviceSet
  int32_t process_index = 0;        // kProcess
};

class DownloadPlan {
 public:
  // NOT_FOUND when a selected device or process holds no shard of the tensor
  // (the message lists the devices that do); INVALID_ARGUMENT for an empty
  // device set; FAILED_PRECONDITION for a whole download of a partial tensor.
  // REQUIRES: backend is the one that owns the tensor's buffers.
  static absl::StatusOr<std::unique_ptr<DownloadPlan>> Create(std::shared_ptr<const Tensor> tensor,
                                                              const DownloadSelection& selection,
                                                              DeviceBackend* backend,
                                                              RemoteShards* remote = nullptr);

  const Tensor& tensor() const { return *tensor_; }
  DType dtype() const { return tensor_->dtype; }
  const Shape& shape() const { return shape_; }
  int64_t total_bytes() const { return total_bytes_; }
  // The shards streamed, in stream order; empty for kWhole.
  const std::vector<ShardDomain>& pieces() const { return pieces_; }
  // The daemon holding pieces()[i].
  int32_t piece_process(size_t i) const { return tensor_->shards[piece_shards_[i]].process_index; }

  // Copies stream bytes [offset, offset + length) into `dst`.
  // INVALID_ARGUMENT when the range is outside [0, total_bytes()];
  // FAILED_PRECONDITION for an out-of-order read of a plan with remote
  // boxes; their streams' errors.
  // Large reads are spread over threads (spread_copy.h).
  absl::Status Read(int64_t offset, int64_t length, char* dst);

 private:
  // Read of a validated range on the calling thread.
  absl::Status ReadSlice(int64_t offset, int64_t length, char* dst, std::vector<ByteRun>* scratch);
  DownloadPlan(std::shared_ptr<const Tensor> tensor, DeviceBackend* backend, RemoteShards* remote)
      : tensor_(std::move(tensor)), backend_(backend), remote_(remote) {}
  // Reads `runs` of source `shard` (runs' src offsets within `box`) into
  // dst: locally, or from its remote stream (opened at first use) in order.
  absl::Status ReadRuns(size_t source, size_t shard, const Box& box, absl::Span<const ByteRun> runs,
                        char* dst);

  std::shared_ptr<const Tensor> tensor_;
  DeviceBackend* backend_;
  RemoteShards* remote_;
  bool has_remote_ = false;
  int64_t next_offset_ = 0;  // where the next in-order read starts
  // One stream per remote source (gather box or piece), opened lazily.
  std::vector<std::unique_ptr<RemoteBoxStream>> streams_;
  bool whole_ = true;
  // kWhole: boxes of the replica-0 shards and their indices in tensor_->shards.
  std::vector<Box> gather_boxes_;
  std::vector<size_t> gather_shards_;
  // Pieces: shard index and first stream byte of each.
  std::vector<size_t> piece_shards_;
  std::vector<int64_t> piece_offsets_;
  std::vector<ShardDomain> pieces_;
  Shape shape_;
  int64_t total_bytes_ = 0;
  std::vector<ByteRun> scratch_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_DOWNLOAD_PLAN_H_
