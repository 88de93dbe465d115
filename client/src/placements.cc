#include "placement/client/placements.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// Strips surrounding whitespace and one pair of matching quotes.
std::string CleanName(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return std::string(absl::StripAsciiWhitespace(s));
}

// Splits `text` on commas that are not inside parentheses.
absl::StatusOr<std::vector<std::string>> SplitTopLevel(absl::string_view text,
                                                       absl::string_view whole) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '(') {
      if (++depth > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec '", whole, "': nested tuples are not allowed"));
      }
    } else if (c == ')') {
      if (--depth < 0) {
        return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "': unbalanced ')'"));
      }
    }
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "': unbalanced '('"));
  }
  parts.push_back(current);
  return parts;
}

absl::StatusOr<std::vector<std::string>> ParseEntry(absl::string_view entry,
                                                    absl::string_view whole, size_t index) {
  std::string e(absl::StripAsciiWhitespace(entry));
  if (e.empty() || e == "None" || e == "none" || e == "()") return std::vector<std::string>{};
  std::vector<std::string> axes;
  if (e.front() == '(') {
    if (e.back() != ')') {
      return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "' entry ", index, " ('", e,
                                                     "'): expected ')' at the end"));
    }
    for (const auto& piece : absl::StrSplit(e.substr(1, e.size() - 2), ',')) {
      std::string name = CleanName(piece);
      if (name.empty()) continue;  // ("x",) is a one-axis tuple
      axes.push_back(std::move(name));
    }
    if (axes.empty()) return axes;
  } else {
    axes.push_back(CleanName(e));
  }
  for (const auto& name : axes) {
    if (name.empty() || name == "None" || name.find_first_of("() \t'\"") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "' entry ", index, " ('", e,
                                                     "'): '", name, "' is not an axis name"));
    }
  }
  return axes;
}

}  // namespace

absl::StatusOr<Spec> ParseSpec(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if ((absl::StartsWith(s, "P(") || absl::StartsWith(s, "PartitionSpec(")) &&
      absl::EndsWith(s, ")")) {
    s = s.substr(s.find('(') + 1);
    s.remove_suffix(1);
    s = absl::StripAsciiWhitespace(s);
  }
  Spec spec;
  if (s.empty()) return spec;
  auto parts = SplitTopLevel(s, text);
  if (!parts.ok()) return parts.status();
  // A trailing comma ("data,") adds no entry, as in Python.
  if (parts->size() > 1 && absl::StripAsciiWhitespace(parts->back()).empty()) parts->pop_back();
  for (size_t i = 0; i < parts->size(); ++i) {
    auto entry = ParseEntry((*parts)[i], text, i);
    if (!entry.ok()) return entry.status();
    spec.push_back(*std::move(entry));
  }
  return spec;
}

std::string SpecToString(const Spec& spec) {
  std::vector<std::string> entries;
  for (const auto& dim : spec) {
    if (dim.empty()) {
      entries.push_back("None");
    } else if (dim.size() == 1) {
      entries.push_back(absl::StrCat("'", dim[0], "'"));
    } else {
      entries.push_back(absl::StrCat("(",
                                     absl::StrJoin(dim, ", ",
                                                   [](std::string* out, const std::string& a) {
                                                     absl::StrAppend(out, "'", a, "'");
                                                   }),
                                     ")"));
    }
  }
  return absl::StrCat("P(", absl::StrJoin(entries, ", "), ")");
}

MeshRef::MeshRef(std::string mesh_id) : id_(std::move(mesh_id)) {}
MeshRef::MeshRef(const char* mesh_id) : id_(mesh_id == nullptr ? "" : mesh_id) {}
MeshRef::MeshRef(const pb::Mesh& mesh) : id_(mesh.id()), mesh_(mesh) {}

absl::Status MeshRef::CheckAxis(absl::string_view axis, absl::string_view field) const {
  if (axis.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must not be empty"));
  }
  if (!mesh_.has_value()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const auto& a : mesh_->axes()) {
    if (a.name() == axis) return absl::OkStatus();
    names.push_back(a.name());
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": mesh '", id_, "' has no axis '", axis,
                                                 "' (axes: ", absl::StrJoin(names, ", "), ")"));
}

Placement Placement::Device(int64_t device_id) {
  pb::Placement p;
  p.set_device_id(device_id);
  return Placement(std::move(p));
}

Placement Placement::Sharded(const MeshRef& mesh, Spec spec) {
  pb::Placement p;
  pb::Sharding* sharding = p.mutable_sharding();
  sharding->set_mesh_id(mesh.id());
  for (auto& dim : spec) {
    auto* d = sharding->mutable_spec()->add_dims();
    for (auto& axis : dim) d->add_axes(std::move(axis));
  }
  return Placement(std::move(p));
}

Placement Placement::Replicated(const MeshRef& mesh) {
  pb::Placement p;
  p.set_replicated_mesh_id(mesh.id());
  return Placement(std::move(p));
}

Placement Placement::FromProto(pb::Placement proto) { return Placement(std::move(proto)); }

Placement Placement::Padded() const {
  Placement copy = *this;
  if (copy.proto_.has_sharding())
    copy.proto_.mutable_sharding()->set_mode(pb::SHARDING_MODE_PADDED);
  return copy;
}

Placement Placement::WithPartial(std::vector<std::string> axes, pb::ReduceOp op) const {
  Placement copy = *this;
  if (!copy.proto_.has_sharding()) return copy;
  auto* sharding = copy.proto_.mutable_sharding();
  sharding->clear_partial_axes();
  for (auto& a : axes) sharding->add_partial_axes(std::move(a));
  sharding->set_partial_op(op);
  return copy;
}

std::string Placement::ToString() const {
  switch (proto_.target_case()) {
    case pb::Placement::kDeviceId:
      return absl::StrCat("device ", proto_.device_id());
    case pb::Placement::kReplicatedMeshId:
      return absl::StrCat("replicated on ", proto_.replicated_mesh_id());
    case pb::Placement::kSharding: {
      Spec spec;
      for (const auto& d : proto_.sharding().spec().dims()) {
        spec.emplace_back(d.axes().begin(), d.axes().end());
      }
      std::string out = absl::StrCat(proto_.sharding().mesh_id(), " ", SpecToString(spec));
      if (proto_.sharding().partial_axes_size() > 0) {
        absl::StrAppend(&out, " partial(", absl::StrJoin(proto_.sharding().partial_axes(), ", "),
                        ")");
      }
      if (proto_.sharding().mode() == pb::SHARDING_MODE_PADDED) absl::StrAppend(&out, " padded");
      return out;
    }
    case pb::Placement::TARGET_NOT_SET:
      break;
  }
  return "default device";
}

Rule::Rule(const Placement& placement) { *proto_.mutable_placement() = placement.proto(); }

Rule Rule::ShardBatchDim(const MeshRef& mesh, int64_t batch_axis, std::string mesh_axis) {
  Rule r;
  auto* rule = r.proto_.mutable_shard_batch_dim();
  rule->set_mesh_id(mesh.id());
  rule->set_batch_axis(batch_axis);
  rule->set_mesh_axis(std::move(mesh_axis));
  return r;
}

Rule Rule::Replicate(std::vector<int64_t> device_ids) {
  Rule r;
  auto* rule = r.proto_.mutable_replicate();
  for (int64_t d : device_ids) rule->add_device_ids(d);
  return r;
}

Rule Rule::ReplicateOn(const MeshRef& mesh) {
  Rule r;
  r.proto_.mutable_replicate()->set_mesh_id(mesh.id());
  return r;
}

Rule Rule::ModelState(const MeshRef& mesh, std::string param_sharding) {
  Rule r;
  auto* rule = r.proto_.mutable_model_state();
  rule->set_mesh_id(mesh.id());
  rule->set_param_sharding(std::move(param_sharding));
  return r;
}

Rule Rule::DataPartition(const MeshRef& mesh, pb::DataPartition partition) {
  Rule r;
  auto* rule = r.proto_.mutable_data_partition();
  rule->set_mesh_id(mesh.id());
  rule->set_partition(partition);
  return r;
}

Rule Rule::FromProto(pb::PlacementRule proto) {
  Rule r;
  r.proto_ = std::move(proto);
  return r;
}

std::string Rule::ToString() const {
  switch (proto_.rule_case()) {
    case pb::PlacementRule::kPlacement:
      return Placement::FromProto(proto_.placement()).ToString();
    case pb::PlacementRule::kShardBatchDim: {
      const auto& r = proto_.shard_batch_dim();
      return absl::StrCat("shard_batch_dim(mesh=", r.mesh_id(),
                          ", batch_axis=", r.has_batch_axis() ? r.batch_axis() : 0,
                          ", mesh_axis=", r.mesh_axis().empty() ? "data" : r.mesh_axis(), ")");
    }
    case pb::PlacementRule::kReplicate: {
      const auto& r = proto_.replicate();
      if (!r.mesh_id().empty()) return absl::StrCat("replicated on ", r.mesh_id());
      if (r.device_ids_size() == 0) return "replicated on all devices";
      return absl::StrCat("replicated on devices [", absl::StrJoin(r.device_ids(), ", "), "]");
    }
    case pb::PlacementRule::kModelState: {
      const auto& r = proto_.model_state();
      return absl::StrCat("shard_model_state(mesh=", r.mesh_id(), ", param_sharding=",
                          r.param_sharding().empty() ? "replicate" : r.param_sharding(), ")");
    }
    case pb::PlacementRule::kDataPartition:
      return absl::StrCat("data_partition(mesh=", proto_.data_partition().mesh_id(), ", ",
                          pb::DataPartition_Name(proto_.data_partition().partition()), ")");
    case pb::PlacementRule::RULE_NOT_SET:
      break;
  }
  return "default device";
}

}  // namespace placement::client
