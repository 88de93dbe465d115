// PlacementRule: where tensors go, in the words of the seeds' placement
// calls -- the core form of placement.v1.Placement / PlacementRule (the
// service converts and validates them, server/service/from_proto.h;
// PlacementResolver turns them into shardings, placement_rules.h).
//
// Plain value types; thread-compatible.
#ifndef PLACEMENT_SERVER_TENSOR_PLACEMENT_RULE_H_
#define PLACEMENT_SERVER_TENSOR_PLACEMENT_RULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "common/reduce_op.h"
#include "common/sharding.h"

namespace placement::server {

// place_on_device: the whole tensor on one device.
struct OnDevice {
  int64_t device_id = 0;
};

// distribute_batch / device_put: a registered mesh + PartitionSpec, with
// optional partial axes (DTensor Partial) combined by `partial_op`.
struct ShardingRequest {
  std::string mesh_id;
  PartitionSpec spec;
  std::vector<std::string> partial_axes;
  ReduceOp partial_op = ReduceOp::kSum;  // used only with partial axes
  ShardingMode mode = ShardingMode::kEven;
};

// P() on a registered mesh.
struct ReplicatedOnMesh {
  std::string mesh_id;
};

// Where a tensor lives; monostate = the default (first) device.
using TensorPlacement = std::variant<std::monostate, OnDevice, ShardingRequest, ReplicatedOnMesh>;

// shard_batch_dim(batch_axis=0, mesh_axis="data").
struct ShardBatchDimRule {
  std::string mesh_id;
  std::optional<int64_t> batch_axis;  // unset = 0
  std::string mesh_axis;              // empty = "data"
};

// replicate_across_devices: a registered mesh, or an implicit "replica"
// mesh over `device_ids` (every device when empty).
struct ReplicateRule {
  std::string mesh_id;
  std::vector<int64_t> device_ids;
};

// shard_model_state(param_sharding="replicate"|"shard").
struct ModelStateRule {
  std::string mesh_id;
  std::string param_sharding;  // empty = "replicate"
};

// loadax host_to_global_device_array partitions.
enum class DataPartition { kFull, kReplicated };

struct DataPartitionRule {
  std::string mesh_id;
  DataPartition partition = DataPartition::kFull;
};

// How to place every array of a group (or one tensor); monostate = the
// default device.
using PlacementRule = std::variant<std::monostate, TensorPlacement, ShardBatchDimRule,
                                   ReplicateRule, ModelStateRule, DataPartitionRule>;

// True when no rule is given (monostate): batches then use their stream's.
inline bool IsDefaultRule(const PlacementRule& rule) {
  return std::holds_alternative<std::monostate>(rule);
}

// The mesh `rule` names; empty for the default device and single devices.
inline const std::string& MeshIdOf(const PlacementRule& rule) {
  static const std::string* const kNone = new std::string();
  if (const auto* placement = std::get_if<TensorPlacement>(&rule)) {
    if (const auto* s = std::get_if<ShardingRequest>(placement)) return s->mesh_id;
    if (const auto* r = std::get_if<ReplicatedOnMesh>(placement)) return r->mesh_id;
    return *kNone;
  }
  if (const auto* r = std::get_if<ShardBatchDimRule>(&rule)) return r->mesh_id;
  if (const auto* r = std::get_if<ReplicateRule>(&rule)) return r->mesh_id;
  if (const auto* r = std::get_if<ModelStateRule>(&rule)) return r->mesh_id;
  if (const auto* r = std::get_if<DataPartitionRule>(&rule)) return r->mesh_id;
  return *kNone;
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_PLACEMENT_RULE_H_
