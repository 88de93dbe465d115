// PlacementResolver: turns a placement rule (PlacementRule or
// TensorPlacement, placement_rule.h) into the NamedSharding a tensor of a
// given shape gets. This is where the seeds' placement calls live:
//
//   OnDevice                       place_on_device: one-device mesh (NOT_FOUND
//                                  for unknown devices); unset rule or unset
//                                  target = the default (first) device.
//   ShardingRequest                distribute_batch / device_put: registered
//                                  mesh + PartitionSpec (+ partial axes, mode).
//   ReplicatedOnMesh               P() on a registered mesh.
//   ShardBatchDimRule              shard_batch_dim(batch_axis=0, mesh_axis="data"):
//                                  rank 0 or batch_axis >= rank -> replicated;
//                                  negative batch_axis counts from the end.
//   ReplicateRule                  replicate_across_devices: P() over a registered
//                                  mesh, or over an implicit one-axis mesh
//                                  "replica" of the given devices (all when none).
//   ModelStateRule                 shard_model_state: "replicate" (default) -> P();
//                                  "shard" -> dim 0 over the mesh's FIRST axis;
//                                  anything else INVALID_ARGUMENT.
//   DataPartitionRule              loadax FULL (default): dim 0 over the product of
//                                  ALL mesh axes in mesh order ("({shape}) cannot be
//                                  sharded across {n} devices." when indivisible);
//                                  REPLICATED -> P().
//
// RuleScope::kGroupMember applies the rule to one array of a group (UploadBatch,
// Place): spec entries beyond the array's rank must shard nothing and are
// dropped, so {"images": [8,28,28,3], "labels": [8]} share P('data', None,
// None, None). kSingleTensor keeps JAX's rule that a spec longer than the rank
// is an error.
//
// Every result is validated against the shape (NamedSharding::ValidateFor).
// Errors: NOT_FOUND for unknown meshes and devices; INVALID_ARGUMENT for bad
// specs, axes, modes, strings and indivisible dimensions.
//
// Holds no state of its own; thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_PLACEMENT_RULES_H_
#define PLACEMENT_SERVER_TENSOR_PLACEMENT_RULES_H_

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/mesh/mesh_registry.h"
#include "server/tensor/placement_rule.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

enum class RuleScope { kSingleTensor, kGroupMember };

class PlacementResolver {
 public:
  // REQUIRES: meshes (and its inventory) outlive the resolver.
  explicit PlacementResolver(const MeshRegistry* meshes) : meshes_(meshes) {}

  absl::StatusOr<ResolvedSharding> Resolve(const PlacementRule& rule,
                                           absl::Span<const int64_t> shape,
                                           RuleScope scope = RuleScope::kSingleTensor) const;
  absl::StatusOr<ResolvedSharding> ResolvePlacement(
      const TensorPlacement& placement, absl::Span<const int64_t> shape,
      RuleScope scope = RuleScope::kSingleTensor) const;
  // A sharding on its registered mesh, not yet checked against a shape.
  // NOT_FOUND for an unknown mesh; INVALID_ARGUMENT for an empty mesh_id,
  // unknown or repeated axes.
  absl::StatusOr<ResolvedSharding> ResolveSharding(const ShardingRequest& sharding) const;

 private:
  absl::StatusOr<ResolvedSharding> ShardBatchDim(const ShardBatchDimRule& rule,
                                                 absl::Span<const int64_t> shape) const;
  absl::StatusOr<ResolvedSharding> Replicate(const ReplicateRule& rule) const;
  absl::StatusOr<ResolvedSharding> ModelState(const ModelStateRule& rule) const;
  absl::StatusOr<ResolvedSharding> DataPartitionSharding(const DataPartitionRule& rule,
                                                         absl::Span<const int64_t> shape) const;
  absl::StatusOr<RegisteredMesh> FindMesh(const std::string& mesh_id,
                                          absl::string_view field) const;

  const MeshRegistry* meshes_;
};

// Drops spec entries beyond `rank` when they shard nothing (their axes'
// sizes multiply to 1); INVALID_ARGUMENT naming the entry otherwise.
absl::StatusOr<NamedSharding> TrimSpecToRank(const NamedSharding& sharding, size_t rank);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_PLACEMENT_RULES_H_
