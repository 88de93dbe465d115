#include "server/service/rule_meshes.h"

#include "absl/strings/str_cat.h"
#include "server/tensor/label_limits.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

// OK for ids that are empty, unknown (left to the resolver) or visible.
absl::Status CheckNamed(const MeshRegistry& meshes, const Caller& caller, const std::string& id) {
  if (id.empty()) return absl::OkStatus();
  if (absl::Status s = CheckLength("mesh_id", id, kMaxMeshIdLength); !s.ok()) return s;
  absl::StatusOr<RegisteredMesh> mesh = meshes.Get(id);
  if (!mesh.ok() || caller.Sees(mesh->tenant)) return absl::OkStatus();
  return absl::NotFoundError(absl::StrCat("mesh '", id, "' does not exist"));
}

}  // namespace

absl::StatusOr<RegisteredMesh> GetVisibleMesh(const MeshRegistry& meshes, const Caller& caller,
                                              const std::string& id) {
  if (absl::Status s = CheckLength("mesh_id", id, kMaxMeshIdLength); !s.ok()) return s;
  absl::StatusOr<RegisteredMesh> mesh = meshes.Get(id);
  if (!mesh.ok()) return mesh.status();
  if (!caller.Sees(mesh->tenant)) {
    return absl::NotFoundError(absl::StrCat("mesh '", id, "' does not exist"));
  }
  return mesh;
}

absl::Status CheckPlacementMeshVisible(const MeshRegistry& meshes, const Caller& caller,
                                       const pb::Placement& placement) {
  switch (placement.target_case()) {
    case pb::Placement::kSharding:
      return CheckNamed(meshes, caller, placement.sharding().mesh_id());
    case pb::Placement::kReplicatedMeshId:
      return CheckNamed(meshes, caller, placement.replicated_mesh_id());
    default:
      return absl::OkStatus();
  }
}

absl::Status CheckRuleMeshesVisible(const MeshRegistry& meshes, const Caller& caller,
                                    const pb::PlacementRule& rule) {
  switch (rule.rule_case()) {
    case pb::PlacementRule::kPlacement:
      return CheckPlacementMeshVisible(meshes, caller, rule.placement());
    case pb::PlacementRule::kShardBatchDim:
      return CheckNamed(meshes, caller, rule.shard_batch_dim().mesh_id());
    case pb::PlacementRule::kReplicate:
      return CheckNamed(meshes, caller, rule.replicate().mesh_id());
    case pb::PlacementRule::kModelState:
      return CheckNamed(meshes, caller, rule.model_state().mesh_id());
    case pb::PlacementRule::kDataPartition:
      return CheckNamed(meshes, caller, rule.data_partition().mesh_id());
    case pb::PlacementRule::RULE_NOT_SET:
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

}  // namespace placement::server
