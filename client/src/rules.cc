#include "placement/client/rules.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/partition_spec_text.h"
#include "common/sharding.h"

namespace placement::client {

absl::StatusOr<Spec> ParseSpec(absl::string_view text) {
  absl::StatusOr<PartitionSpec> spec = ParsePartitionSpec(text);
  if (!spec.ok()) return spec.status();
  return std::move(spec->dims);
}

std::string SpecToString(const Spec& spec) { return PartitionSpec{spec}.ToString(); }

MeshRef::MeshRef(std::string mesh_id) : id_(std::move(mesh_id)) {}
MeshRef::MeshRef(const char* mesh_id) : id_(mesh_id == nullptr ? "" : mesh_id) {}
MeshRef::MeshRef(const Mesh& mesh) : id_(mesh.id), mesh_(mesh) {}

absl::Status MeshRef::CheckAxis(absl::string_view axis, absl::string_view field) const {
  if (axis.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not be empty"));
  }
  if (!mesh_.has_value()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const MeshAxis& a : mesh_->axes) {
    if (a.name == axis) return absl::OkStatus();
    names.push_back(a.name);
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": mesh '", id_, "' has no axis '", axis,
                                                 "' (axes: ", absl::StrJoin(names, ", "), ")"));
}

Placement Placement::Device(int64_t device_id) {
  Placement p;
  p.kind_ = Kind::kDevice;
  p.device_id_ = device_id;
  return p;
}

Placement Placement::Sharded(const MeshRef& mesh, Spec spec) {
  Sharding sharding;
  sharding.mesh_id = mesh.id();
  sharding.spec = std::move(spec);
  return Sharded(std::move(sharding));
}

Placement Placement::Sharded(Sharding sharding) {
  Placement p;
  p.kind_ = Kind::kSharded;
  p.mesh_id_ = sharding.mesh_id;
  p.sharding_ = std::move(sharding);
  return p;
}

Placement Placement::Replicated(const MeshRef& mesh) {
  Placement p;
  p.kind_ = Kind::kReplicated;
  p.mesh_id_ = mesh.id();
  return p;
}

Placement Placement::Padded() const {
  Placement copy = *this;
  if (copy.is_sharded()) copy.sharding_.mode = ShardingMode::kPadded;
  return copy;
}

Placement Placement::WithPartial(std::vector<std::string> axes, ReduceOp op) const {
  Placement copy = *this;
  if (!copy.is_sharded()) return copy;
  copy.sharding_.partial_axes = std::move(axes);
  copy.sharding_.partial_op = op;
  return copy;
}

std::string Placement::ToString() const {
  switch (kind_) {
    case Kind::kDevice:
      return absl::StrCat("device ", device_id_);
    case Kind::kReplicated:
      return absl::StrCat("replicated on ", mesh_id_);
    case Kind::kSharded: {
      std::string out = absl::StrCat(sharding_.mesh_id, " ", SpecToString(sharding_.spec));
      if (!sharding_.partial_axes.empty()) {
        absl::StrAppend(&out, " partial(", absl::StrJoin(sharding_.partial_axes, ", "), ")");
      }
      if (sharding_.mode == ShardingMode::kPadded) absl::StrAppend(&out, " padded");
      return out;
    }
    case Kind::kDefault:
      break;
  }
  return "default device";
}

Rule::Rule(const Placement& placement) : kind_(Kind::kPlacement), placement_(placement) {}

Rule Rule::ShardBatchDim(const MeshRef& mesh, int64_t batch_axis, std::string mesh_axis) {
  Rule r;
  r.kind_ = Kind::kShardBatchDim;
  r.mesh_id_ = mesh.id();
  r.batch_axis_ = batch_axis;
  r.mesh_axis_ = std::move(mesh_axis);
  return r;
}

Rule Rule::Replicate(std::vector<int64_t> device_ids) {
  Rule r;
  r.kind_ = Kind::kReplicate;
  r.device_ids_ = std::move(device_ids);
  return r;
}

Rule Rule::ReplicateOn(const MeshRef& mesh) {
  Rule r;
  r.kind_ = Kind::kReplicate;
  r.mesh_id_ = mesh.id();
  return r;
}

Rule Rule::ModelState(const MeshRef& mesh, std::string param_sharding) {
  Rule r;
  r.kind_ = Kind::kModelState;
  r.mesh_id_ = mesh.id();
  r.param_sharding_ = std::move(param_sharding);
  return r;
}

Rule Rule::DataPartition(const MeshRef& mesh, client::DataPartition partition) {
  Rule r;
  r.kind_ = Kind::kDataPartition;
  r.mesh_id_ = mesh.id();
  r.partition_ = partition;
  return r;
}

std::string Rule::ToString() const {
  switch (kind_) {
    case Kind::kPlacement:
      return placement_.ToString();
    case Kind::kShardBatchDim:
      return absl::StrCat("shard_batch_dim(mesh=", mesh_id_, ", batch_axis=", batch_axis_,
                          ", mesh_axis=", mesh_axis_.empty() ? "data" : mesh_axis_, ")");
    case Kind::kReplicate:
      if (!mesh_id_.empty()) return absl::StrCat("replicated on ", mesh_id_);
      if (device_ids_.empty()) return "replicated on all devices";
      return absl::StrCat("replicated on devices [", absl::StrJoin(device_ids_, ", "), "]");
    case Kind::kModelState:
      return absl::StrCat("shard_model_state(mesh=", mesh_id_, ", param_sharding=",
                          param_sharding_.empty() ? "replicate" : param_sharding_, ")");
    case Kind::kDataPartition:
      return absl::StrCat("data_partition(mesh=", mesh_id_, ", ", DataPartitionName(partition_),
                          ")");
    case Kind::kDefault:
      break;
  }
  return "default device";
}

}  // namespace placement::client
