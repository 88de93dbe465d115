// DataParallel: a facade named after the seed's artifex DataParallel, over a
// Client. Method names follow the seed (snake case, with the seed's
// `_static` variants) so Python code ports line by line.
//
//   DataParallel dp(*client);
//   auto sharding = dp.create_data_parallel_sharding(mesh);   // P('data')
//   auto batch = dp.shard_batch(host_batch, *sharding);       // HostTree or TensorTree
//   auto state = dp.shard_model_state(params, mesh);          // replicated
//
// Shardings are client::Placement values; trees are TensorTree (daemon
// tensors, placed with Place) or HostTree (host arrays, uploaded with one
// UploadBatch straight into the sharding). Every leaf is placed or none is.
// Unlike the seed, shard_model_state rejects a param_sharding other than
// "replicate" / "shard" with INVALID_ARGUMENT instead of sharding on typos.
//
// In a cluster, a DataParallel built with Controller::kMulti runs its
// collectives multi-controller (JAX's model: every process's trainer calls
// all_reduce_gradients on its own daemon with the same tree, and the calls
// run once together); the default, kSingle, lets one call drive every
// daemon. See collectives.h.
//
// Thread-safe; the Client must outlive the facade.
#ifndef PLACEMENT_CLIENT_DATA_PARALLEL_H_
#define PLACEMENT_CLIENT_DATA_PARALLEL_H_

#include <string>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_tree.h"

namespace placement::client {

class DataParallel {
 public:
  explicit DataParallel(const Client& client, Controller controller = Controller::kSingle)
      : client_(client), controller_(controller) {}

  const Client& client() const { return client_; }
  // Who drives all_reduce_gradients when the gradients span daemons.
  Controller controller() const { return controller_; }

  // create_data_parallel_sharding(mesh, data_axis="data") =
  // NamedSharding(mesh, P(data_axis)). INVALID_ARGUMENT for an empty
  // data_axis, or one the mesh lacks when `mesh` carries its axes.
  absl::StatusOr<Placement> create_data_parallel_sharding(
      const MeshRef& mesh, const std::string& data_axis = "data") const {
    return create_data_parallel_sharding_static(mesh, data_axis);
  }
  static absl::StatusOr<Placement> create_data_parallel_sharding_static(
      const MeshRef& mesh, const std::string& data_axis = "data");

  // shard_batch(batch, sharding): the same sharding for every leaf; spec
  // entries beyond a leaf's rank must be None and are dropped.
  absl::StatusOr<TensorTree> shard_batch(const TensorTree& batch, const Placement& sharding) const {
    return shard_batch_static(client_, batch, sharding);
  }
  absl::StatusOr<TensorTree> shard_batch(const HostTree& batch, const Placement& sharding) const {
    return shard_batch_static(client_, batch, sharding);
  }
  static absl::StatusOr<TensorTree> shard_batch_static(const Client& client,
                                                       const TensorTree& batch,
                                                       const Placement& sharding);
  static absl::StatusOr<TensorTree> shard_batch_static(const Client& client, const HostTree& batch,
                                                       const Placement& sharding);

  // shard_model_state(state, mesh, param_sharding="replicate"): "replicate"
  // -> P() on the mesh; "shard" -> dimension 0 over the mesh's first axis
  // (a scalar leaf is then INVALID_ARGUMENT from the daemon, as in JAX).
  // Anything else is INVALID_ARGUMENT, before any call.
  absl::StatusOr<TensorTree> shard_model_state(
      const TensorTree& state, const MeshRef& mesh,
      const std::string& param_sharding = "replicate") const;
  absl::StatusOr<TensorTree> shard_model_state(
      const HostTree& state, const MeshRef& mesh,
      const std::string& param_sharding = "replicate") const;

  // replicate_params(params, mesh) = NamedSharding(mesh, P()) for every leaf.
  absl::StatusOr<TensorTree> replicate_params(const TensorTree& params, const MeshRef& mesh) const;
  absl::StatusOr<TensorTree> replicate_params(const HostTree& params, const MeshRef& mesh) const;

  // ---------------------------------------------------------------------------
  // Collectives (defined in client/src/data_parallel_collectives.cc).
  // ---------------------------------------------------------------------------

  // all_reduce_gradients(gradients, reduce_type="mean", axis_name="batch"):
  // every leaf all-reduced over `axis_name` of its mesh by the daemon, all
  // leaves in ONE fused AllReduceBatch call. A leaf is a per-device
  // gradient tensor: partial over the axis (Assemble of single-device
  // gradients with Placement::WithPartial({axis})), or with dimension 0
  // sharded over it (one gradient block per device). Results have the same
  // keys, replicated over the axis. Leaves must share one mesh and dtype.
  // reduce_type other than "mean" / "sum": INVALID_ARGUMENT "Unsupported
  // reduce_type: x. Use 'mean' or 'sum'." before any call. Note the seed's
  // default axis name "batch": on a mesh without that axis the daemon
  // answers INVALID_ARGUMENT naming the mesh's axes. kDonate reduces in
  // place and deletes the inputs' ids. An empty tree is returned as is.
  // Runs under controller() (the static form: `controller`); a multi call
  // has the Client's default deadline to meet the other processes' calls.
  absl::StatusOr<TensorTree> all_reduce_gradients(
      const TensorTree& gradients, const std::string& reduce_type = "mean",
      const std::string& axis_name = "batch", SourceHandling source = SourceHandling::kKeep) const {
    return all_reduce_gradients_static(client_, gradients, reduce_type, axis_name, source,
                                       controller_);
  }
  static absl::StatusOr<TensorTree> all_reduce_gradients_static(
      const Client& client, const TensorTree& gradients, const std::string& reduce_type = "mean",
      const std::string& axis_name = "batch", SourceHandling source = SourceHandling::kKeep,
      Controller controller = Controller::kSingle);

 private:
  const Client& client_;
  Controller controller_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_DATA_PARALLEL_H_
