// CollectiveClient: typed calls of the daemon's CollectiveService --
// all-reduce, all-gather, reduce-scatter and broadcast of daemon tensors
// over mesh axes (JAX psum / pmean / all_gather / psum_scatter; DTensor
// Partial -> Replicate / Shard). The bytes never leave the daemon: calls
// take tensor ids and return the result's TensorInfo.
//
//   CollectiveClient collectives(*client);
//   // Per-device gradients assembled as a partial tensor over "data":
//   auto grads = tensors.Assemble({3}, Placement::Sharded(mesh, {}).WithPartial({"data"}),
//                                 per_device_ids);
//   auto mean = collectives.AllReduce(grads->id, "mean", {.axes = {"data"}});
//   auto full = collectives.AllGather(sharded_id, /*dim=*/0);
//
// Axes: empty means every mesh axis for AllReduce and Broadcast, the axes
// sharding `dim` for AllGather, and the partial axes for ReduceScatter. Ops
// are ReduceOp values or the seed's names ("sum", "mean", "max", "min",
// "prod"); other names fail with INVALID_ARGUMENT "Unsupported reduce_type:
// ...". ReduceOp::kUnspecified means the tensor's partial op, else sum.
//
// Every call keeps the daemon's gRPC code and message: NOT_FOUND for unknown
// tensors or root devices, INVALID_ARGUMENT for unknown axes and bad ops,
// FAILED_PRECONDITION when the tensor's sharding does not fit the
// collective (the message says how each axis is used). See
// docs/api/collectives.md for the full semantics.
//
// In a cluster (docs/cluster.md) a tensor's shards may live on several
// daemons. CollectiveOptions::controller says who drives the call:
// Controller::kSingle (the default) lets this one call drive every daemon
// that holds shards; Controller::kMulti is JAX's multi-controller model:
// every process's trainer makes the same call (same tensors, op, axes,
// source and name) on its own daemon, the calls meet at a barrier and the
// collective runs once; each call returns the same result. A multi call
// waits for the others up to the daemon's --cluster_op_timeout (and the
// call's deadline: give a multi call a `timeout` long enough for the
// slowest process to arrive). On a lone daemon both mean the same.
//
// A CollectiveClient holds a reference to the Client, which must outlive it.
// Thread-safe.
#ifndef PLACEMENT_CLIENT_COLLECTIVES_H_
#define PLACEMENT_CLIENT_COLLECTIVES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/client/client.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_info.h"
#include "placement/client/types.h"

namespace placement::client {

struct CollectiveOptions {
  // Mesh axes to run over; empty: see the header comment.
  std::vector<std::string> axes;
  // kDonate: AllReduce / AllReduceBatch / Broadcast run in place on the
  // input's device buffers (the input id disappears; the result has a new
  // one); AllGather / ReduceScatter delete the input once the result exists.
  SourceHandling source = SourceHandling::kKeep;
  // Name of the result (single-tensor calls); empty: "<input name>:<collective>"
  // ("batch/images:all_reduce"), or the input's name when it was donated.
  std::string name;
  // Deadline of the call; zero = the Client's default deadline. The daemon
  // stops a collective whose deadline passes (DEADLINE_EXCEEDED).
  absl::Duration timeout = absl::ZeroDuration();
  // Who drives the call when the tensor's shards span daemons (above).
  Controller controller = Controller::kSingle;
};

class CollectiveClient {
 public:
  explicit CollectiveClient(const Client& client) : client_(client) {}

  absl::StatusOr<TensorInfo> AllReduce(const std::string& tensor_id, ReduceOp op,
                                       const CollectiveOptions& options = {}) const;
  absl::StatusOr<TensorInfo> AllReduce(const std::string& tensor_id, const std::string& op_name,
                                       const CollectiveOptions& options = {}) const;

  // Every tensor reduced in one fused daemon call (a gradient pytree): same
  // mesh and dtype for all; shapes may differ. Results in request order;
  // all or nothing. INVALID_ARGUMENT / FAILED_PRECONDITION name
  // "tensor_ids[i]".
  absl::StatusOr<std::vector<TensorInfo>> AllReduceBatch(
      const std::vector<std::string>& tensor_ids, ReduceOp op,
      const CollectiveOptions& options = {}) const;
  absl::StatusOr<std::vector<TensorInfo>> AllReduceBatch(
      const std::vector<std::string>& tensor_ids, const std::string& op_name,
      const CollectiveOptions& options = {}) const;

  // Shard -> replicate along `dim` (negative counts from the end), tiled.
  absl::StatusOr<TensorInfo> AllGather(const std::string& tensor_id, int64_t dim,
                                       const CollectiveOptions& options = {}) const;

  // Partial -> shard along `scatter_dim`.
  absl::StatusOr<TensorInfo> ReduceScatter(const std::string& tensor_id, ReduceOp op,
                                           int64_t scatter_dim,
                                           const CollectiveOptions& options = {}) const;

  // The root device's shard to every device of its group (the root must be
  // a device of the tensor's mesh).
  absl::StatusOr<TensorInfo> Broadcast(const std::string& tensor_id, int64_t root_device_id,
                                       const CollectiveOptions& options = {}) const;

 private:
  absl::StatusOr<TensorInfo> AllReduceImpl(const std::string& tensor_id, ReduceOp op,
                                           const std::string& op_name,
                                           const CollectiveOptions& options) const;
  absl::StatusOr<std::vector<TensorInfo>> AllReduceBatchImpl(
      const std::vector<std::string>& tensor_ids, ReduceOp op, const std::string& op_name,
      const CollectiveOptions& options) const;

  const Client& client_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_COLLECTIVES_H_
