// DataParallel's sharding and placement calls (collectives live in
// data_parallel_collectives.cc).
#include "placement/client/data_parallel.h"

#include "absl/strings/str_cat.h"
#include "placement/client/tensors.h"

namespace placement::client {
namespace {

absl::Status CheckParamSharding(const std::string& param_sharding) {
  if (param_sharding == "replicate" || param_sharding == "shard") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("param_sharding must be 'replicate' or 'shard', got '", param_sharding, "'"));
}

}  // namespace

absl::StatusOr<Placement> DataParallel::create_data_parallel_sharding_static(
    const MeshRef& mesh, const std::string& data_axis) {
  if (mesh.id().empty()) return absl::InvalidArgumentError("mesh id must not be empty");
  absl::Status axis_ok = mesh.CheckAxis(data_axis, "data_axis");
  if (!axis_ok.ok()) return axis_ok;
  return Placement::Sharded(mesh, {{data_axis}});
}

absl::StatusOr<TensorTree> DataParallel::shard_batch_static(const Client& client,
                                                            const TensorTree& batch,
                                                            const Placement& sharding) {
  return PlaceTree(TensorClient(client), batch, sharding);
}

absl::StatusOr<TensorTree> DataParallel::shard_batch_static(const Client& client,
                                                            const HostTree& batch,
                                                            const Placement& sharding) {
  return UploadTree(TensorClient(client), batch, sharding);
}

absl::StatusOr<TensorTree> DataParallel::shard_model_state(
    const TensorTree& state, const MeshRef& mesh, const std::string& param_sharding) const {
  absl::Status ok = CheckParamSharding(param_sharding);
  if (!ok.ok()) return ok;
  return PlaceTree(TensorClient(client_), state, Rule::ModelState(mesh, param_sharding));
}

absl::StatusOr<TensorTree> DataParallel::shard_model_state(
    const HostTree& state, const MeshRef& mesh, const std::string& param_sharding) const {
  absl::Status ok = CheckParamSharding(param_sharding);
  if (!ok.ok()) return ok;
  return UploadTree(TensorClient(client_), state, Rule::ModelState(mesh, param_sharding));
}

absl::StatusOr<TensorTree> DataParallel::replicate_params(const TensorTree& params,
                                                          const MeshRef& mesh) const {
  return PlaceTree(TensorClient(client_), params, Placement::Sharded(mesh, {}));
}

absl::StatusOr<TensorTree> DataParallel::replicate_params(const HostTree& params,
                                                          const MeshRef& mesh) const {
  return UploadTree(TensorClient(client_), params, Placement::Sharded(mesh, {}));
}

}  // namespace placement::client
