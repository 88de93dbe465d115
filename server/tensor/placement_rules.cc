#include "server/tensor/placement_rules.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

absl::StatusOr<ShardingMode> ModeFromProto(int value) {
  switch (value) {
    case pb::SHARDING_MODE_UNSPECIFIED:
    case pb::SHARDING_MODE_EVEN:
      return ShardingMode::kEven;
    case pb::SHARDING_MODE_PADDED:
      return ShardingMode::kPadded;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("sharding.mode is ", value,
                       "; expected SHARDING_MODE_EVEN (1) or SHARDING_MODE_PADDED (2)"));
  }
}

PartitionSpec SpecFromProto(const pb::PartitionSpec& proto) {
  PartitionSpec spec;
  for (const pb::DimSharding& dim : proto.dims()) {
    spec.dims.emplace_back(dim.axes().begin(), dim.axes().end());
  }
  return spec;
}

ResolvedSharding Unregistered(NamedSharding sharding) {
  return ResolvedSharding{std::move(sharding), "", 0};
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

absl::StatusOr<ResolvedSharding> PlacementResolver::Resolve(const pb::PlacementRule& rule,
                                                            absl::Span<const int64_t> shape,
                                                            RuleScope scope) const {
  absl::StatusOr<ResolvedSharding> resolved;
  switch (rule.rule_case()) {
    case pb::PlacementRule::kPlacement:
      return ResolvePlacement(rule.placement(), shape, scope);
    case pb::PlacementRule::kShardBatchDim:
      resolved = ShardBatchDim(rule.shard_batch_dim(), shape);
      break;
    case pb::PlacementRule::kReplicate:
      resolved = Replicate(rule.replicate());
      break;
    case pb::PlacementRule::kModelState:
      resolved = ModelState(rule.model_state());
      break;
    case pb::PlacementRule::kDataPartition:
      resolved = DataPartition(rule.data_partition(), shape);
      break;
    case pb::PlacementRule::RULE_NOT_SET:
      return ResolvePlacement(pb::Placement(), shape, scope);
  }
  if (!resolved.ok()) return resolved.status();
  if (scope == RuleScope::kGroupMember) {
    ASSIGN_OR_RETURN(resolved->sharding, TrimSpecToRank(resolved->sharding, shape.size()));
  }
  RETURN_IF_ERROR(resolved->sharding.ValidateFor(shape));
  return resolved;
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ResolvePlacement(
    const pb::Placement& placement, absl::Span<const int64_t> shape, RuleScope scope) const {
  ResolvedSharding resolved;
  switch (placement.target_case()) {
    case pb::Placement::kDeviceId: {
      ASSIGN_OR_RETURN(DeviceDescription device, meshes_->inventory()->Find(placement.device_id()));
      resolved = Unregistered(NamedSharding::SingleDevice(device.id));
      break;
    }
    case pb::Placement::TARGET_NOT_SET:
      resolved =
          Unregistered(NamedSharding::SingleDevice(meshes_->inventory()->default_device_id()));
      break;
    case pb::Placement::kSharding: {
      ASSIGN_OR_RETURN(resolved, ResolveSharding(placement.sharding()));
      break;
    }
    case pb::Placement::kReplicatedMeshId: {
      ASSIGN_OR_RETURN(RegisteredMesh mesh,
                       FindMesh(placement.replicated_mesh_id(), "placement.replicated_mesh_id"));
      resolved = ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, 0};
      break;
    }
  }
  if (scope == RuleScope::kGroupMember) {
    ASSIGN_OR_RETURN(resolved.sharding, TrimSpecToRank(resolved.sharding, shape.size()));
  }
  RETURN_IF_ERROR(resolved.sharding.ValidateFor(shape));
  return resolved;
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ResolveSharding(
    const pb::Sharding& sharding) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(sharding.mesh_id(), "sharding.mesh_id"));
  ASSIGN_OR_RETURN(ShardingMode mode, ModeFromProto(sharding.mode()));
  std::vector<std::string> partial_axes(sharding.partial_axes().begin(),
                                        sharding.partial_axes().end());
  int32_t partial_op = 0;
  if (!partial_axes.empty()) {
    partial_op = sharding.partial_op();
    if (partial_op == pb::REDUCE_OP_UNSPECIFIED) partial_op = pb::REDUCE_OP_SUM;
    if (!pb::ReduceOp_IsValid(partial_op)) {
      return absl::InvalidArgumentError(absl::StrCat("sharding.partial_op is ", partial_op,
                                                     "; expected a ReduceOp value (1..5)"));
    }
  }
  ASSIGN_OR_RETURN(NamedSharding named,
                   NamedSharding::Create(mesh.mesh, SpecFromProto(sharding.spec()),
                                         std::move(partial_axes), mode));
  return ResolvedSharding{std::move(named), mesh.id, partial_op};
}

absl::StatusOr<ResolvedSharding> PlacementResolver::ShardBatchDim(
    const pb::ShardBatchDimRule& rule, absl::Span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id(), "shard_batch_dim.mesh_id"));
  const std::string axis = rule.mesh_axis().empty() ? "data" : rule.mesh_axis();
  if (mesh.mesh.AxisIndex(axis) < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard_batch_dim.mesh_axis '", axis, "' is not an axis of mesh '", mesh.id, "' ",
        mesh.mesh.ToString(), "; its axes are (", absl::StrJoin(mesh.mesh.AxisNames(), ", "), ")"));
  }
  const int64_t rank = static_cast<int64_t>(shape.size());
  int64_t batch_axis = rule.has_batch_axis() ? rule.batch_axis() : 0;
  if (batch_axis < 0) batch_axis += rank;
  if (batch_axis < 0) {
    return absl::InvalidArgumentError(absl::StrCat("shard_batch_dim.batch_axis ", rule.batch_axis(),
                                                   " is out of range for rank ", rank, " (shape ",
                                                   ShapeToString(shape), ")"));
  }
  // Rank 0 and batch_axis >= rank replicate, as the seed does.
  PartitionSpec spec;
  if (batch_axis < rank) {
    spec.dims.resize(batch_axis + 1);
    spec.dims[batch_axis] = {axis};
  }
  ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
  return ResolvedSharding{std::move(named), mesh.id, 0};
}

absl::StatusOr<ResolvedSharding> PlacementResolver::Replicate(const pb::ReplicateRule& rule) const {
  if (!rule.mesh_id().empty()) {
    if (rule.device_ids_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("replicate names both mesh_id '", rule.mesh_id(), "' and ",
                       rule.device_ids_size(), " device_ids; give one or the other"));
    }
    ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(rule.mesh_id()));
    return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, 0};
  }
  std::vector<int64_t> ids(rule.device_ids().begin(), rule.device_ids().end());
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

absl::StatusOr<ResolvedSharding> PlacementResolver::ModelState(
    const pb::ModelStateRule& rule) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id(), "model_state.mesh_id"));
  const std::string& mode = rule.param_sharding();
  if (mode.empty() || mode == "replicate") {
    return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, 0};
  }
  if (mode == "shard") {
    PartitionSpec spec{{{mesh.mesh.axes().front().name}}};
    ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
    return ResolvedSharding{std::move(named), mesh.id, 0};
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Unsupported param_sharding: '", mode, "'. Use 'replicate' or 'shard'."));
}

absl::StatusOr<ResolvedSharding> PlacementResolver::DataPartition(
    const pb::DataPartitionRule& rule, absl::Span<const int64_t> shape) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, FindMesh(rule.mesh_id(), "data_partition.mesh_id"));
  switch (rule.partition()) {
    case pb::DATA_PARTITION_REPLICATED:
      return ResolvedSharding{NamedSharding::Replicated(mesh.mesh), mesh.id, 0};
    case pb::DATA_PARTITION_UNSPECIFIED:
    case pb::DATA_PARTITION_FULL: {
      const int64_t n = mesh.mesh.num_devices();
      if ((shape.empty() && n != 1) || (!shape.empty() && shape[0] % n != 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat("(", ShapeToString(shape), ") cannot be sharded across ", n, " devices."));
      }
      PartitionSpec spec;
      if (!shape.empty()) spec.dims.push_back(mesh.mesh.AxisNames());
      ASSIGN_OR_RETURN(NamedSharding named, NamedSharding::Create(mesh.mesh, std::move(spec)));
      return ResolvedSharding{std::move(named), mesh.id, 0};
    }
    default:
      return absl::InvalidArgumentError(absl::StrCat("Unsupported partition: ", rule.partition()));
  }
}

}  // namespace placement::server
