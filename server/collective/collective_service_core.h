// CollectiveServiceCore: the collective service's core API -- what the gRPC
// handler calls. It resolves daemon tensors, plans the collective over their
// mesh (collective_plan.h), allocates the result in the TensorStore, runs the
// CollectiveEngine over every group in one call, and commits the result.
//
// Sources (SourceHandling):
//   kKeep    the input stays; the result is a new tensor.
//   kDonate  AllReduce / AllReduceBatch / Broadcast run IN PLACE on the
//            input's buffers (TensorStore::TakeForDonation; the input's id
//            disappears and the result gets a new one). AllGather /
//            ReduceScatter need new buffers; the input is deleted once the
//            result exists. A donated input that a failure (cancellation,
//            engine error) interrupts mid-way is consumed, not restored --
//            like a donated JAX buffer. Validation errors never consume it.
//            FAILED_PRECONDITION while another operation holds the input.
// Lifetime: running collectives hold their inputs (shared_ptr), so deleting
// an input mid-collective removes its id at once and frees its memory when
// the collective finishes; the collective still completes.
// Ops: `op` unset means the input's partial_op when it has one, else SUM.
// Integer MEAN truncates toward zero (see kernels/reduce_kernels.h).
// Results keep the input's owner and name unless `name` is given, and have
// partial_op = the input's when partial axes remain, else unset.
//
// Codes: NOT_FOUND for unknown tensor ids and root devices the daemon does
// not have; INVALID_ARGUMENT / FAILED_PRECONDITION per collective_plan.h and
// for root devices outside the mesh, bool reductions, mismatched batches
// (the message names the index); RESOURCE_EXHAUSTED when the result does
// not fit (nothing is kept); CANCELLED / DEADLINE_EXCEEDED from the
// CollectiveContext; the engine's codes.
//
// Thread-safe and lock-free itself: concurrent collectives (on the same or
// different meshes) only share the store's and the engine's own locking.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_SERVICE_CORE_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_SERVICE_CORE_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/collective/collective_engine.h"
#include "server/collective/collective_plan.h"
#include "server/collective/collective_request.h"
#include "server/collective/distributed_collectives.h"
#include "server/collective/plan_cache.h"
#include "server/metrics/metrics.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// Where a collective's results go: by default committed in the store. A
// daemon doing its part of a collective that spans daemons holds them
// pending under ids the driver chose (server/cluster/cluster_collectives.h);
// the function returns what the caller reports (the result's record).
using CollectiveCommit = std::function<absl::StatusOr<std::shared_ptr<const Tensor>>(
    std::unique_ptr<Tensor> result, size_t index)>;

// What every collective request names.
struct CollectiveTarget {
  std::string tensor_id;
  std::vector<std::string> axes;  // empty: see collective_plan.h per collective
  SourceHandling source = SourceHandling::kKeep;
  std::string name;                          // optional name of the result
  const CollectiveCommit* commit = nullptr;  // null: TensorStore::Commit
};

class CollectiveServiceCore {
 public:
  // REQUIRES: store, engine and metrics (nullable) outlive the core; the
  // engine serves the store's backend. Counts completed collectives in
  // placementd_collectives_total{collective} and the device bytes of their
  // inputs in placementd_collective_bytes_total{collective}.
  CollectiveServiceCore(TensorStore* store, CollectiveEngine* engine, Metrics* metrics = nullptr);
  TensorStore* store() const { return store_; }

  // Per-device bytes up to which a collective counts as quick.
  static constexpr int64_t kQuickBytesPerDevice = 256 << 10;
  // True when the tensors together hold at most kQuickBytesPerDevice on
  // their largest shard (or an id is unknown: the call fails at once). Such
  // a collective takes microseconds, so the handler runs it on the gRPC
  // thread instead of paying a hand-off to its dispatch pool.
  bool IsQuick(const std::vector<std::string>& tensor_ids) const;

  absl::StatusOr<std::shared_ptr<const Tensor>> AllReduce(const CollectiveTarget& target,
                                                          std::optional<ReduceOp> op,
                                                          const CollectiveContext& context) const;

  // One fused engine call for every tensor. All tensors must be on the same
  // mesh with the same dtype (INVALID_ARGUMENT naming tensor_ids[i]) and be
  // reducible over `axes` (FAILED_PRECONDITION naming tensor_ids[i]);
  // shapes may differ (a gradient pytree). Results in request order. All or
  // nothing: on error no result is kept (and, with kDonate, no input is
  // taken unless the engine already ran).
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> AllReduceBatch(
      const std::vector<std::string>& tensor_ids, const std::vector<std::string>& axes,
      std::optional<ReduceOp> op, SourceHandling source, const CollectiveContext& context,
      const CollectiveCommit* commit = nullptr) const;

  // In a cluster the engine is the cluster's (ClusterEngine), made once the
  // cluster has formed. REQUIRES: before serving.
  void set_engine(CollectiveEngine* engine) { engine_ = engine; }
  // In a cluster, the requests Execute hands over (their inputs span
  // daemons, or they are multi-controller). REQUIRES: before serving.
  void set_distributed(DistributedCollectives* distributed) { distributed_ = distributed; }

  // `request` for `tenant`: through the cluster when there is one
  // (DistributedCollectives::Execute decides whether it spans daemons),
  // else Run on this daemon. The results, committed.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Execute(
      const CollectiveRequest& request, const std::string& tenant,
      const CollectiveContext& context) const;

  // `request` on this daemon's shards (the method of its kind below),
  // publishing the results through `commit` (null: TensorStore::Commit).
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Run(
      const CollectiveRequest& request, const CollectiveContext& context,
      const CollectiveCommit* commit) const;

  // The groups `request` runs over, across every daemon: per item, the
  // global device id of each rank in rank order (every input's groups, for
  // a batch). Planned from the inputs' records alone, so every daemon
  // holding them gets the same groups. Run's planning errors (unknown ids,
  // the sharding's form, a root outside the mesh); nothing is allocated.
  absl::StatusOr<std::vector<std::vector<int64_t>>> DeviceGroups(
      const CollectiveRequest& request) const;

  absl::StatusOr<std::shared_ptr<const Tensor>> AllGather(const CollectiveTarget& target,
                                                          int64_t dim,
                                                          const CollectiveContext& context) const;

  absl::StatusOr<std::shared_ptr<const Tensor>> ReduceScatter(
      const CollectiveTarget& target, std::optional<ReduceOp> op, int64_t scatter_dim,
      const CollectiveContext& context) const;

  // NOT_FOUND when the daemon has no device `root_device_id`;
  // INVALID_ARGUMENT when the device is not in the tensor's mesh.
  absl::StatusOr<std::shared_ptr<const Tensor>> Broadcast(const CollectiveTarget& target,
                                                          int64_t root_device_id,
                                                          const CollectiveContext& context) const;

 private:
  // A planned collective whose result has the same per-device byte sizes as
  // its input (AllReduce, Broadcast): run it in place on a donated input or
  // into a new tensor.
  absl::StatusOr<std::shared_ptr<const Tensor>> RunSameSize(const CollectiveTarget& target,
                                                            std::shared_ptr<const Tensor> input,
                                                            const CollectivePlan& plan, ReduceOp op,
                                                            const CollectiveContext& context) const;
  // AllGather / ReduceScatter: into a new tensor, staging non-contiguous
  // blocks; deletes a donated input afterwards.
  absl::StatusOr<std::shared_ptr<const Tensor>> RunResized(const CollectiveTarget& target,
                                                           std::shared_ptr<const Tensor> input,
                                                           const CollectivePlan& plan, ReduceOp op,
                                                           const CollectiveContext& context) const;

  void Count(CollectiveKind kind, int64_t device_bytes) const;
  // TensorStore::Commit, or `commit` when set.
  absl::StatusOr<std::shared_ptr<const Tensor>> Publish(std::unique_ptr<Tensor> result,
                                                        size_t index,
                                                        const CollectiveCommit* commit) const;

  TensorStore* store_;
  CollectiveEngine* engine_;
  Metrics* metrics_;
  // placementd_collectives_total and _bytes_total by CollectiveKind, looked
  // up once (Count runs on every call).
  std::array<CounterSeries, 4> counted_;
  std::array<CounterSeries, 4> counted_bytes_;
  DistributedCollectives* distributed_ = nullptr;
  // Every plan goes through it: DeviceGroups and the call itself plan once.
  PlanCache plans_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_SERVICE_CORE_H_
