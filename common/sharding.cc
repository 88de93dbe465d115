#include "common/sharding.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement {
namespace {

// "'x'" for one axis, "('x', 'y')" for a tuple, "None" for none.
std::string SpecEntryToString(const std::vector<std::string>& axes) {
  if (axes.empty()) return "None";
  auto quoted = [](std::string* out, const std::string& name) {
    absl::StrAppend(out, "'", name, "'");
  };
  if (axes.size() == 1) return absl::StrCat("'", axes[0], "'");
  return absl::StrCat("(", absl::StrJoin(axes, ", ", quoted), ")");
}

std::string AxisTuple(const std::vector<std::string>& names) {
  return absl::StrCat("(",
                      absl::StrJoin(names, ", ",
                                    [](std::string* out, const std::string& name) {
                                      absl::StrAppend(out, "'", name, "'");
                                    }),
                      ")");
}

}  // namespace

std::string PartitionSpec::ToString() const {
  return absl::StrCat("P(",
                      absl::StrJoin(dims, ", ",
                                    [](std::string* out, const std::vector<std::string>& axes) {
                                      out->append(SpecEntryToString(axes));
                                    }),
                      ")");
}

std::string_view ShardingModeName(ShardingMode mode) {
  switch (mode) {
    case ShardingMode::kEven:
      return "even";
    case ShardingMode::kPadded:
      return "padded";
  }
  return "unknown";
}

NamedSharding::NamedSharding(Mesh mesh, PartitionSpec spec, std::vector<std::string> partial_axes,
                             ShardingMode mode)
    : mesh_(std::move(mesh)),
      spec_(std::move(spec)),
      partial_axes_(std::move(partial_axes)),
      mode_(mode) {
  dim_axes_.reserve(spec_.dims.size());
  for (const std::vector<std::string>& axes : spec_.dims) {
    std::vector<int>& indices = dim_axes_.emplace_back();
    for (const std::string& name : axes) indices.push_back(mesh_.AxisIndex(name));
  }
  for (const std::string& name : partial_axes_)
    partial_axis_indices_.push_back(mesh_.AxisIndex(name));
}

absl::StatusOr<NamedSharding> NamedSharding::Create(Mesh mesh, PartitionSpec spec,
                                                    std::vector<std::string> partial_axes,
                                                    ShardingMode mode) {
  if (mode != ShardingMode::kEven && mode != ShardingMode::kPadded) {
    return absl::InvalidArgumentError(
        absl::StrCat("sharding mode ", static_cast<int>(mode), " is not a ShardingMode value"));
  }
  auto not_found = [&](const std::string& name, const std::string& where) {
    return absl::InvalidArgumentError(
        absl::StrCat("Resource axis '", name, "' of ", where, " is not found in mesh ",
                     mesh.ToString(), "; mesh axes are ", AxisTuple(mesh.AxisNames())));
  };
  // Mesh axes already claimed by a spec entry or an earlier partial axis.
  std::vector<bool> used(mesh.num_axes(), false);
  for (const std::vector<std::string>& axes : spec.dims) {
    for (const std::string& name : axes) {
      const int index = mesh.AxisIndex(name);
      if (index < 0) return not_found(name, spec.ToString());
      if (used[index]) {
        return absl::InvalidArgumentError(absl::StrCat(
            "A single NamedSharding spec can map every mesh axis to at most one positional "
            "dimension, but ",
            spec.ToString(), " has duplicate entries for '", name, "'"));
      }
      used[index] = true;
    }
  }
  for (size_t i = 0; i < partial_axes.size(); ++i) {
    const std::string& name = partial_axes[i];
    const int index = mesh.AxisIndex(name);
    if (index < 0) return not_found(name, absl::StrCat("partial_axes ", AxisTuple(partial_axes)));
    if (used[index]) {
      bool in_spec = true;
      for (size_t j = 0; j < i; ++j) in_spec = in_spec && partial_axes[j] != name;
      return absl::InvalidArgumentError(
          in_spec ? absl::StrCat("axis '", name, "' is used twice: in spec ", spec.ToString(),
                                 " and in partial_axes ", AxisTuple(partial_axes),
                                 "; an axis either shards a dimension or is partial, not both")
                  : absl::StrCat("partial_axes ", AxisTuple(partial_axes),
                                 " has duplicate entries for '", name, "'"));
    }
    used[index] = true;
  }
  return NamedSharding(std::move(mesh), std::move(spec), std::move(partial_axes), mode);
}

NamedSharding NamedSharding::Replicated(Mesh mesh) {
  return NamedSharding(std::move(mesh), PartitionSpec{}, {}, ShardingMode::kEven);
}

NamedSharding NamedSharding::SingleDevice(int64_t device_id) {
  return Replicated(Mesh::SingleDevice(device_id));
}

int64_t NamedSharding::NumShardsAlong(int dim) const {
  if (dim < 0 || dim >= static_cast<int>(dim_axes_.size())) return 1;
  int64_t n = 1;
  for (int index : dim_axes_[dim]) n *= mesh_.axes()[index].size;
  return n;
}

int64_t NamedSharding::NumPartials() const {
  int64_t n = 1;
  for (int index : partial_axis_indices_) n *= mesh_.axes()[index].size;
  return n;
}

bool NamedSharding::IsFullyReplicated() const {
  if (NumPartials() != 1) return false;
  for (int d = 0; d < static_cast<int>(dim_axes_.size()); ++d) {
    if (NumShardsAlong(d) != 1) return false;
  }
  return true;
}

absl::Status NamedSharding::ValidateFor(absl::Span<const int64_t> shape) const {
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape[", d, "] is ", shape[d], "; dimensions must be >= 0"));
    }
  }
  if (spec_.dims.size() > shape.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("Sharding ", ToString(), " is only valid for values of rank at least ",
                     spec_.dims.size(), ", but was applied to a value of rank ", shape.size(),
                     " (shape ", ShapeToString(shape), ")"));
  }
  if (mode_ == ShardingMode::kPadded) return absl::OkStatus();
  for (size_t d = 0; d < spec_.dims.size(); ++d) {
    const int64_t n = NumShardsAlong(static_cast<int>(d));
    if (shape[d] % n != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Sharding ", ToString(), " splits dimension ", d, " of shape ",
                       ShapeToString(shape), " ", n, " ways over axes ", AxisTuple(spec_.dims[d]),
                       ", but its size ", shape[d], " is not divisible by ", n,
                       "; pad the tensor or use SHARDING_MODE_PADDED (ShardingMode::kPadded) for "
                       "uneven shards"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ShardDomain>> NamedSharding::IndexDomains(
    absl::Span<const int64_t> shape) const {
  if (absl::Status s = ValidateFor(shape); !s.ok()) return s;
  const int rank = static_cast<int>(shape.size());
  std::vector<int64_t> num_shards(rank, 1);
  std::vector<int64_t> block(rank, 0);
  for (int d = 0; d < rank; ++d) {
    num_shards[d] = NumShardsAlong(d);
    block[d] = (shape[d] + num_shards[d] - 1) / num_shards[d];  // == shape/n in even mode
  }
  const std::vector<MeshAxis>& axes = mesh_.axes();

  std::vector<ShardDomain> domains;
  domains.reserve(mesh_.num_devices());
  // Key: partial_index, then (begin, end) per dimension.
  absl::flat_hash_map<std::vector<int64_t>, int64_t> seen;
  std::vector<int64_t> key;
  for (int64_t position = 0; position < mesh_.num_devices(); ++position) {
    const std::vector<int64_t> coords = mesh_.Coordinates(position);
    ShardDomain& domain = domains.emplace_back();
    domain.device_id = mesh_.device_ids()[position];
    domain.mesh_position = position;
    for (int index : partial_axis_indices_) {
      domain.partial_index = domain.partial_index * axes[index].size + coords[index];
    }
    domain.box.resize(rank);
    domain.shard_shape.resize(rank);
    key.assign(1, domain.partial_index);
    for (int d = 0; d < rank; ++d) {
      int64_t k = 0;
      if (d < static_cast<int>(dim_axes_.size())) {
        for (int index : dim_axes_[d]) k = k * axes[index].size + coords[index];
      }
      IndexRange& range = domain.box[d];
      range.begin = std::min(k * block[d], shape[d]);
      range.end = std::min((k + 1) * block[d], shape[d]);
      domain.shard_shape[d] = range.end - range.begin;
      key.push_back(range.begin);
      key.push_back(range.end);
    }
    domain.replica_id = seen[key]++;
  }
  return domains;
}

std::string NamedSharding::ToString() const {
  std::string out = absl::StrCat("NamedSharding(", mesh_.ToString(), ", ", spec_.ToString());
  if (!partial_axes_.empty()) absl::StrAppend(&out, ", partial=", AxisTuple(partial_axes_));
  if (mode_ != ShardingMode::kEven)
    absl::StrAppend(&out, ", mode=", std::string(ShardingModeName(mode_)));
  out.push_back(')');
  return out;
}

}  // namespace placement
