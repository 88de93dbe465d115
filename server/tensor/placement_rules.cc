#include "server/tensor/placement_rules.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

ResolvedSharding Unregistered(NamedSharding sharding) {
  return ResolvedSharding{std::move(sharding), "", std::nullopt};
}

}  // namespace

absl::StatusOr<NamedSharding> TrimSpecToRank(const NamedSharding& sharding, size_t rank) {
  const PartitionSpec& spec = sharding.spec();
  if (spec.dims.size() <= rank) return sharding;
  for (size_t d = rank; d < spec.dims.size(); ++d) {
    const int64_t ways = sharding.NumShardsAlong(static_cast<int>(d));
    if (ways != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("spec ", spec.ToString(), " shards dimension ", d, " ", ways,
                       " ways, but the array has rank ", rank,
                       "; in a group, spec entries beyond an array's rank must be None"));
    }
  }
  PartitionSpec trimmed{
      std::vector<std::vector<std::string>>(spec.dims.begin(), spec.dims.begin() + rank)};
  return NamedSharding::Create(sharding.mesh(), std::move(trimmed), sharding.partial_axes(),
                               sharding.mode());
}

absl::StatusOr<RegisteredMesh> PlacementResolver::FindMesh(const std::string& mesh_id,
                                                           absl::string_view field) const {
  if (mesh_id.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is empty; name a registered mesh"));
  }
  return meshes_->Get(mesh_id);
}

absl::StatusOr<ResolvedSharding> PlacementResolver::Resolve(const PlacementRule& rule,
                                                            absl::Span<const int64_t> shape,
                                                            RuleScope scope) const {
  absl::StatusOr<ResolvedSharding> resolved;
  if (const auto* placement = std::get_if<TensorPlacement>(&rule)) {
    return ResolvePlacement(*placement, shape, scope);
  } else if (const auto* batch = std::get_if<ShardBatchDimRule>(&rule)) {
    resolved = ShardBatchDim(*batch, shape);
  } else if (const auto* replicate = std::get_if<ReplicateRule>(&rule)) {
    resolved = Replicate(*replicate);
  } else if (const auto* model = std::get_if<ModelStateRule>(&rule)) {
    resolved = ModelState(*model);
  } else if (const auto* partition = std::get_if<DataPartitionRule>(&rule)) {
    resolved = DataPartitionSharding(*partition, shape);
  } else {
    return ResolvePlacement(TensorPlacement(), shape, scope);
  }
  if (!resolved.ok()) return resolved.status();
  if (scope == RuleScope::kGroupMember) {
    ASSIGN_OR_RETURN(resolved->sharding, TrimSpecToRank(resolved->sharding, shape.size()));
  }
  RETURN_IF_ERROR(resolved->sharding.ValidateFor(shape));
  return resolved;
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ResolvePlacement(
    const TensorPlacement& placement, absl::Span<const int64_t> shape, RuleScope scope) const {
  ResolvedSharding resolved;
  if (const auto* device = std::get_if<OnDevice>(&placement)) {
    ASSIGN_OR_RETURN(DeviceDescription found, meshes_->inventory()->Find(device->device_id));
    resolved = Unregistered(NamedSharding::SingleDevice(found.id));
  } else if (const auto* sharding = std::get_if<ShardingRequest>(&placement)) {
    ASSIGN_OR_RETURN(resolved, ResolveSharding(*sharding));
  } else if (const auto* replicated = std::get_if<ReplicatedOnMesh>(&placement)) {
    ASSIGN_OR_RETURN(RegisteredMesh mesh,
                     FindMesh(replicated->mesh_id, "placement.replicated_mesh_id"));
    resolved = ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, std::nullopt};
  } else {
    resolved = Unregistered(NamedSharding::SingleDevice(meshes_->inventory()->default_device_id()));
  }
  if (scope == RuleScope::kGroupMember) {
    ASSIGN_OR_RETURN(resolved.sharding, TrimSpecToRank(resolved.sharding, shape.size()));
  }
  RETURN_IF_ERROR(resolved.sharding.ValidateFor(shape));
  return resolved;
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ResolveSharding(
    const ShardingRequest& sharding) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(sharding.mesh_id, "sharding.mesh_id"));
  std::optional<ReduceOp> partial_op;
  if (!sharding.partial_axes.empty()) partial_op = sharding.partial_op;
  ASSIGN_OR_RETURN(
      NamedSharding named,
      NamedSharding::Create(mesh.mesh, sharding.spec, sharding.partial_axes, sharding.mode));
  return ResolvedSharding{std::move(named), mesh.id, partial_op};
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ShardBatchDim(
    const ShardBatchDimRule& rule, absl::Span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id, "shard_batch_dim.mesh_id"));
  const std::string axis = rule.mesh_axis.empty() ? "data" : rule.mesh_axis;
  if (mesh.mesh.AxisIndex(axis) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard_batch_dim.mesh_axis '", axis, "' is not an axis of mesh '", mesh.id, "' ",
        mesh.mesh.ToString(), "; its axes are (", absl::StrJoin(mesh.mesh.AxisNames(), ", "), ")"));
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t batch_axis = rule.batch_axis.value_or(0);
  if (batch_axis < 0) batch_axis += rank;
  if (batch_axis < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard_batch_dim.batch_axis ", rule.batch_axis.value_or(0),
                     " is out of range for rank ", rank, " (shape ", ShapeToString(shape), ")"));
  }
  // Rank 0 and batch_axis >= rank replicate, as the seed does.
  PartitionSpec spec;
  if (batch_axis < rank) {
    spec.dims.resize(batch_axis + 1);
    spec.dims[batch_axis] = {axis};
  }
  ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
  return ResolvedSharding{std::move(named), mesh.id, std::nullopt};
}

absl::StatusOr<ResolvedSharding> PlacementResolver::Replicate(const ReplicateRule& rule) const {
  if (!rule.mesh_id.empty()) {
    if (!rule.device_ids.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("replicate names both mesh_id '", rule.mesh_id,
                                                     "' and ", rule.device_ids.size(),
                                                     " device_ids; give one or the other"));
    }
    ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(rule.mesh_id));
    return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, std::nullopt};
  }
  std::vector<int64_t> ids = rule.device_ids;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<DeviceDescription> found = meshes_->inventory()->Find(ids[i]);
    if (!found.ok()) {
      return absl::NotFoundError(
          absl::StrCat("replicate.device_ids[", i, "]: ", found.status().message()));
    }
  }
  if (ids.empty()) ids = meshes_->TopologyOrderedDevices();
  const int64_t n = static_cast<int64_t>(ids.size());
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create({{"replica", n}}, std::move(ids)));
  return Unregistered(NamedSharding::Replicated(std::move(mesh)));
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ModelState(const ModelStateRule& rule) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id, "model_state.mesh_id"));
  const std::string& mode = rule.param_sharding;
  if (mode.empty() || mode == "replicate") {
    return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, std::nullopt};
  }
  if (mode == "shard") {
    PartitionSpec spec{{{mesh.mesh.axes().front().name}}};
    ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
    return ResolvedSharding{std::move(named), mesh.id, std::nullopt};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Unsupported param_sharding: '", mode, "'. Use 'replicate' or 'shard'."));
}

absl::StatusOr<ResolvedSharding> PlacementResolver::DataPartitionSharding(
    const DataPartitionRule& rule, absl::Span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id, "data_partition.mesh_id"));
  if (rule.partition == DataPartition::kReplicated) {
    return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, std::nullopt};
  }
  const int64_t n = mesh.mesh.num_devices();
  if ((shape.empty() && n != 1) || (!shape.empty() && shape[0] % n != 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("(", ShapeToString(shape), ") cannot be sharded across ", n, " devices."));
  }
  PartitionSpec spec;
  if (!shape.empty()) spec.dims.push_back(mesh.mesh.AxisNames());
  ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
  return ResolvedSharding{std::move(named), mesh.id, std::nullopt};
}

}  // namespace placement::server
