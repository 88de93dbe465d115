// Value types that say where daemon tensors go, so callers need not build
// wire messages by hand:
//
//   Spec        a PartitionSpec: per tensor dimension, the mesh axes that
//               shard it ({} = None); {{"data"}, {}} is P('data', None) and
//               {{"x", "y"}} is P(('x', 'y')).
//   MeshRef     a registered mesh, by id or by the Mesh that
//               CreateMesh/GetMesh returned (then its axes are known locally
//               and facades check axis names before any call).
//   Placement   one device, a mesh + Spec (JAX NamedSharding), or fully
//               replicated on a mesh.
//   Rule        a Placement or one of the seeds' rules (shard_batch_dim,
//               replicate_across_devices, shard_model_state, loadax
//               host_to_global_device_array partitions), applied per array.
//
// Examples:
//   Placement::Device(3)
//   Placement::Sharded(mesh, {{"data"}, {}})           // P('data', None)
//   Placement::Sharded("m", {{}, {"data"}}).Padded()    // uneven allowed
//   Placement::Replicated(mesh)                         // P() on every mesh device
//   Rule::ShardBatchDim(mesh, /*batch_axis=*/0, "data")
//   Rule::Replicate({0, 1})                             // mesh "replica" over 0, 1
//
// The daemon validates everything (unknown mesh: NOT_FOUND; unknown axis,
// indivisible dimension: INVALID_ARGUMENT); these types only describe
// requests (client/src/convert.cc turns them into wire messages).
// All types are values; thread-compatible.
#ifndef PLACEMENT_CLIENT_RULES_H_
#define PLACEMENT_CLIENT_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/client/types.h"

namespace placement::client {

// Parses the CLI / Python-ish forms: "data,None", "data", "None,model",
// "(x,y),None", "P('data', None)", "" or "P()" (fully replicated).
// INVALID_ARGUMENT naming the offending text for unbalanced parentheses,
// nested tuples or empty axis names. (The grammar is common/'s
// ParsePartitionSpec, shared with the daemon's tools.)
absl::StatusOr<Spec> ParseSpec(absl::string_view text);
// "P('data', None, ('x', 'y'))"; "P()" for an empty spec (common/'s
// PartitionSpec::ToString).
std::string SpecToString(const Spec& spec);

// A registered mesh: its id, and its description when known.
class MeshRef {
 public:
  MeshRef(std::string mesh_id);  // NOLINT(google-explicit-constructor)
  MeshRef(const char* mesh_id);  // NOLINT(google-explicit-constructor)
  MeshRef(const Mesh& mesh);     // NOLINT(google-explicit-constructor)

  const std::string& id() const { return id_; }
  // The mesh's axes and devices when this ref was built from a Mesh.
  const std::optional<Mesh>& mesh() const { return mesh_; }
  // OK when the axes are unknown here or `axis` is one of them;
  // INVALID_ARGUMENT "mesh 'm' has no axis 'x' (axes: data, model)" otherwise.
  absl::Status CheckAxis(absl::string_view axis, absl::string_view field) const;

 private:
  std::string id_;
  std::optional<Mesh> mesh_;
};

class Placement {
 public:
  enum class Kind {
    kDefault,     // the daemon's default device
    kDevice,      // the whole tensor on one device
    kSharded,     // mesh + PartitionSpec (NamedSharding)
    kReplicated,  // every device of a mesh holds the whole tensor
  };

  // The daemon's default device.
  Placement() = default;
  // The whole tensor on device `device_id` (a global id from ListDevices).
  static Placement Device(int64_t device_id);
  // NamedSharding(mesh, P(*spec)); JAX's even-division rule applies.
  static Placement Sharded(const MeshRef& mesh, Spec spec);
  // Any resolved sharding (partial axes and mode included).
  static Placement Sharded(Sharding sharding);
  // Fully replicated: every device of the mesh holds the whole tensor.
  static Placement Replicated(const MeshRef& mesh);

  // Sharded placements only (others are returned unchanged): allow
  // dimensions that do not divide (XLA / torch.chunk padding).
  Placement Padded() const;
  // Sharded placements only: devices differing on `axes` hold summands
  // combined with `op` (DTensor Partial).
  Placement WithPartial(std::vector<std::string> axes, ReduceOp op = ReduceOp::kSum) const;

  Kind kind() const { return kind_; }
  bool is_device() const { return kind_ == Kind::kDevice; }
  bool is_sharded() const { return kind_ == Kind::kSharded; }
  bool is_replicated() const { return kind_ == Kind::kReplicated; }
  // REQUIRES: is_device().
  int64_t device_id() const { return device_id_; }
  // REQUIRES: is_sharded().
  const Sharding& sharding() const { return sharding_; }
  // The mesh of a sharded or replicated placement; empty otherwise.
  const std::string& mesh_id() const { return mesh_id_; }
  // "device 3", "mesh-1 P('data', None)", "replicated on mesh-1",
  // "default device".
  std::string ToString() const;

  bool operator==(const Placement&) const = default;

 private:
  Kind kind_ = Kind::kDefault;
  int64_t device_id_ = 0;
  std::string mesh_id_;
  Sharding sharding_;
};

class Rule {
 public:
  enum class Kind {
    kDefault,        // the daemon's default device
    kPlacement,      // one Placement for every array
    kShardBatchDim,  // DevicePlacement.shard_batch_dim
    kReplicate,      // replicate_across_devices, or P() on an existing mesh
    kModelState,     // DataParallel.shard_model_state
    kDataPartition,  // loadax host_to_global_device_array
  };

  // The daemon's default device.
  Rule() = default;
  // Every array gets `placement`. For groups, spec entries beyond an array's
  // rank must be None and are dropped (the seeds' {"images", "labels"}).
  Rule(const Placement& placement);  // NOLINT(google-explicit-constructor)

  // shard_batch_dim(data, mesh, batch_axis=0, mesh_axis="data"): rank 0 or
  // batch_axis >= rank -> replicated; negative batch_axis counts from the end.
  static Rule ShardBatchDim(const MeshRef& mesh, int64_t batch_axis = 0,
                            std::string mesh_axis = "data");
  // replicate_across_devices(data, devices=None): a one-axis mesh "replica"
  // over `device_ids` (all devices when empty), every array replicated.
  static Rule Replicate(std::vector<int64_t> device_ids = {});
  // Fully replicated on an existing mesh.
  static Rule ReplicateOn(const MeshRef& mesh);
  // shard_model_state(state, mesh, param_sharding): "replicate" -> P();
  // "shard" -> dimension 0 over the mesh's first axis. Other strings are
  // rejected by the daemon (and by DataParallel before any call).
  static Rule ModelState(const MeshRef& mesh, std::string param_sharding = "replicate");
  // loadax host_to_global_device_array partition (kFull: dimension 0 over
  // the product of all mesh axes; kReplicated).
  static Rule DataPartition(const MeshRef& mesh,
                            client::DataPartition partition = client::DataPartition::kFull);

  Kind kind() const { return kind_; }
  // True for Rule(): the daemon's default device.
  bool is_default() const { return kind_ == Kind::kDefault; }
  // kPlacement: the placement.
  const Placement& placement() const { return placement_; }
  // kShardBatchDim, kModelState, kDataPartition, and kReplicate on an
  // existing mesh: the mesh id (empty for kReplicate over devices).
  const std::string& mesh_id() const { return mesh_id_; }
  // kShardBatchDim.
  int64_t batch_axis() const { return batch_axis_; }
  const std::string& mesh_axis() const { return mesh_axis_; }
  // kReplicate over devices (empty = all devices).
  const std::vector<int64_t>& device_ids() const { return device_ids_; }
  // kModelState.
  const std::string& param_sharding() const { return param_sharding_; }
  // kDataPartition.
  client::DataPartition partition() const { return partition_; }

  std::string ToString() const;
  bool operator==(const Rule&) const = default;

 private:
  Kind kind_ = Kind::kDefault;
  Placement placement_;
  std::string mesh_id_;
  int64_t batch_axis_ = 0;
  std::string mesh_axis_;
  std::vector<int64_t> device_ids_;
  std::string param_sharding_;
  client::DataPartition partition_ = client::DataPartition::kFull;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_RULES_H_
