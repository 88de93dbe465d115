#include "common/mesh.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace placement {
namespace {

bool IsAxisNameStart(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

bool IsAxisNameChar(char c) {
  return IsAxisNameStart(c) || (c >= '0' && c <= '9') || c == '.' || c == '-';
}

absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string AxesToString(const std::vector<MeshAxis>& axes) {
  return absl::StrJoin(axes, ", ", [](std::string* out, const MeshAxis& axis) {
    absl::StrAppend(out, axis.name, "=", axis.size);
  });
}

}  // namespace

absl::Status ValidateAxisName(std::string_view name, std::string_view field) {
  constexpr size_t kMaxLength = 64;
  if (name.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(field), " is empty; axis names must be non-empty"));
  }
  bool ok = name.size() <= kMaxLength && IsAxisNameStart(name[0]);
  for (size_t i = 1; ok && i < name.size(); ++i) ok = IsAxisNameChar(name[i]);
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat(Sv(field), " is '", Sv(name), "' (", name.size(),
                     " characters); axis names must match [A-Za-z_][A-Za-z0-9_.-]{0,63}"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Mesh> Mesh::Create(std::vector<MeshAxis> axes, std::vector<int64_t> device_ids) {
  if (axes.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh axes are empty; a mesh needs at least one axis (got ", device_ids.size(),
                     " device ids); use a single-device placement for one device"));
  }
  absl::flat_hash_set<std::string> names;
  int64_t product = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    const MeshAxis& axis = axes[i];
    const std::string field = absl::StrCat("axes[", i, "].name");
    if (absl::Status s = ValidateAxisName(axis.name, field); !s.ok()) return s;
    if (!names.insert(axis.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", axis.name, "' is a duplicate; mesh axes are (", AxesToString(axes), ")"));
    }
    if (axis.size < 1) {
      return absl::InvalidArgumentError(absl::StrCat("axes[", i, "].size of axis '", axis.name,
                                                     "' is ", axis.size, "; sizes must be >= 1"));
    }
    if (axis.size > kMaxDevices || product > kMaxDevices / axis.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("mesh (", AxesToString(axes), ") has more than ", kMaxDevices, " devices"));
    }
    product *= axis.size;
  }
  if (static_cast<int64_t>(device_ids.size()) != product) {
    return absl::InvalidArgumentError(
        absl::StrCat("mesh axes (", AxesToString(axes), ") need ", product,
                     " device ids (the product of the axis sizes), got ", device_ids.size()));
  }
  absl::flat_hash_set<int64_t> seen;
  for (size_t i = 0; i < device_ids.size(); ++i) {
    if (device_ids[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_ids[", i, "] is ", device_ids[i], "; device ids must be >= 0"));
    }
    if (!seen.insert(device_ids[i]).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("device_ids[", i, "] is ", device_ids[i],
                       ", which appears earlier in the mesh; device ids must be unique"));
    }
  }
  return Mesh(std::move(axes), std::move(device_ids));
}

Mesh Mesh::SingleDevice(int64_t device_id) { return Mesh({}, {device_id}); }

int Mesh::AxisIndex(std::string_view name) const {
  for (size_t i = 0; i < axes_.size(); ++i) {
    if (axes_[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Mesh::AxisNames() const {
  std::vector<std::string> names;
  names.reserve(axes_.size());
  for (const MeshAxis& axis : axes_) names.push_back(axis.name);
  return names;
}

std::vector<int64_t> Mesh::AxisSizes() const {
  std::vector<int64_t> sizes;
  sizes.reserve(axes_.size());
  for (const MeshAxis& axis : axes_) sizes.push_back(axis.size);
  return sizes;
}

std::vector<int64_t> Mesh::Coordinates(int64_t position) const {
  std::vector<int64_t> coords(axes_.size());
  for (size_t i = axes_.size(); i-- > 0;) {
    coords[i] = position % axes_[i].size;
    position /= axes_[i].size;
  }
  return coords;
}

int64_t Mesh::PositionAt(const std::vector<int64_t>& coordinates) const {
  int64_t position = 0;
  for (size_t i = 0; i < axes_.size(); ++i) position = position * axes_[i].size + coordinates[i];
  return position;
}

int64_t Mesh::PositionOf(int64_t device_id) const {
  for (size_t i = 0; i < device_ids_.size(); ++i) {
    if (device_ids_[i] == device_id) return static_cast<int64_t>(i);
  }
  return -1;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> Mesh::AxisGroups(
    const std::vector<std::string>& axis_names) const {
  // Mesh indices of the collective's axes, in listed order.
  std::vector<int> named;
  std::vector<bool> is_named(axes_.size(), axis_names.empty());
  if (axis_names.empty()) {
    for (int i = 0; i < num_axes(); ++i) named.push_back(i);
  } else {
    for (size_t i = 0; i < axis_names.size(); ++i) {
      const int index = AxisIndex(axis_names[i]);
      if (index < 0) {
        return absl::InvalidArgumentError(absl::StrCat("axis_names[", i, "] '", axis_names[i],
                                                       "' is not an axis of ", ToString()));
      }
      if (is_named[index]) {
        return absl::InvalidArgumentError(
            absl::StrCat("axis_names[", i, "] '", axis_names[i], "' is listed more than once"));
      }
      named.push_back(index);
      is_named[index] = true;
    }
  }
  int64_t group_size = 1;
  for (int index : named) group_size *= axes_[index].size;
  const int64_t num_groups = num_devices() / group_size;

  std::vector<std::vector<int64_t>> groups(num_groups, std::vector<int64_t>(group_size));
  for (int64_t position = 0; position < num_devices(); ++position) {
    const std::vector<int64_t> coords = Coordinates(position);
    int64_t group = 0;
    for (size_t i = 0; i < axes_.size(); ++i) {
      if (!is_named[i]) group = group * axes_[i].size + coords[i];
    }
    int64_t rank = 0;
    for (int index : named) rank = rank * axes_[index].size + coords[index];
    groups[group][rank] = position;
  }
  return groups;
}

absl::StatusOr<std::vector<std::vector<int64_t>>> Mesh::AxisDeviceGroups(
    const std::vector<std::string>& axis_names) const {
  absl::StatusOr<std::vector<std::vector<int64_t>>> groups = AxisGroups(axis_names);
  if (!groups.ok()) return groups;
  for (std::vector<int64_t>& group : *groups) {
    for (int64_t& entry : group) entry = device_ids_[entry];
  }
  return groups;
}

std::string Mesh::ToString() const { return absl::StrCat("Mesh(", AxesToString(axes_), ")"); }

std::string Mesh::DebugString() const {
  return absl::StrCat("Mesh(", AxesToString(axes_), axes_.empty() ? "" : "; ", "devices=[",
                      absl::StrJoin(device_ids_, ", "), "])");
}

}  // namespace placement
