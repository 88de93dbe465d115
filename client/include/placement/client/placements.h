// Value types that say where daemon tensors go, so callers need not build
// placement.v1 protos by hand:
//
//   Spec        a PartitionSpec: per tensor dimension, the mesh axes that
//               shard it ({} = None); {{"data"}, {}} is P('data', None) and
//               {{"x", "y"}} is P(('x', 'y')).
//   MeshRef     a registered mesh, by id or by the placement.v1.Mesh that
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
// indivisible dimension: INVALID_ARGUMENT); these types only build requests.
// All types are values; thread-compatible.
#ifndef PLACEMENT_CLIENT_PLACEMENTS_H_
#define PLACEMENT_CLIENT_PLACEMENTS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"

namespace placement::client {

// PartitionSpec entries: per leading tensor dimension, the mesh axes that
// shard it, first listed most significant; an empty entry is None.
using Spec = std::vector<std::vector<std::string>>;

// Parses the CLI / Python-ish forms: "data,None", "data", "None,model",
// "(x,y),None", "P('data', None)", "" or "P()" (fully replicated).
// INVALID_ARGUMENT naming the offending text for unbalanced parentheses,
// nested tuples or empty axis names.
absl::StatusOr<Spec> ParseSpec(absl::string_view text);
// "P('data', None, ('x', 'y'))"; "P()" for an empty spec.
std::string SpecToString(const Spec& spec);

// What happens to the source tensors of Place / Assemble / Disassemble.
enum class SourceHandling {
  kKeep,    // sources stay (JAX device_put copies)
  kDonate,  // sources are deleted once the results exist
};

inline placement::v1::SourceHandling SourceHandlingToProto(SourceHandling source) {
  return source == SourceHandling::kDonate ? placement::v1::SOURCE_HANDLING_DONATE
                                           : placement::v1::SOURCE_HANDLING_KEEP;
}

// A registered mesh: its id, and its description when known.
class MeshRef {
 public:
  MeshRef(std::string mesh_id);              // NOLINT(google-explicit-constructor)
  MeshRef(const char* mesh_id);              // NOLINT(google-explicit-constructor)
  MeshRef(const placement::v1::Mesh& mesh);  // NOLINT(google-explicit-constructor)

  const std::string& id() const { return id_; }
  // The mesh's axes and devices when this ref was built from a Mesh.
  const std::optional<placement::v1::Mesh>& mesh() const { return mesh_; }
  // OK when the axes are unknown here or `axis` is one of them;
  // INVALID_ARGUMENT "mesh 'm' has no axis 'x' (axes: data, model)" otherwise.
  absl::Status CheckAxis(absl::string_view axis, absl::string_view field) const;

 private:
  std::string id_;
  std::optional<placement::v1::Mesh> mesh_;
};

class Placement {
 public:
  // The whole tensor on device `device_id` (a global id from ListDevices).
  static Placement Device(int64_t device_id);
  // NamedSharding(mesh, P(*spec)); JAX's even-division rule applies.
  static Placement Sharded(const MeshRef& mesh, Spec spec);
  // Fully replicated: every device of the mesh holds the whole tensor.
  static Placement Replicated(const MeshRef& mesh);
  static Placement FromProto(placement::v1::Placement proto);

  // Sharded placements only (others are returned unchanged): allow
  // dimensions that do not divide (XLA / torch.chunk padding).
  Placement Padded() const;
  // Sharded placements only: devices differing on `axes` hold summands
  // combined with `op` (DTensor Partial).
  Placement WithPartial(std::vector<std::string> axes,
                        placement::v1::ReduceOp op = placement::v1::REDUCE_OP_SUM) const;

  bool is_device() const { return proto_.has_device_id(); }
  bool is_sharded() const { return proto_.has_sharding(); }
  bool is_replicated() const { return proto_.has_replicated_mesh_id(); }
  const placement::v1::Placement& proto() const { return proto_; }
  // "device 3", "mesh-1 P('data', None)", "replicated on mesh-1".
  std::string ToString() const;

 private:
  explicit Placement(placement::v1::Placement proto) : proto_(std::move(proto)) {}
  placement::v1::Placement proto_;
};

class Rule {
 public:
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
  // loadax host_to_global_device_array partition (FULL: dimension 0 over the
  // product of all mesh axes; REPLICATED).
  static Rule DataPartition(const MeshRef& mesh, placement::v1::DataPartition partition =
                                                     placement::v1::DATA_PARTITION_FULL);
  static Rule FromProto(placement::v1::PlacementRule proto);

  // True for Rule(): the daemon's default device.
  bool is_default() const {
    return proto_.rule_case() == placement::v1::PlacementRule::RULE_NOT_SET;
  }
  const placement::v1::PlacementRule& proto() const { return proto_; }
  std::string ToString() const;

 private:
  placement::v1::PlacementRule proto_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_PLACEMENTS_H_
