// Mesh: a named, row-major arrangement of device ids (JAX `jax.sharding.Mesh`).
//
// A mesh is an ordered list of named axes with sizes plus the device ids laid
// out row-major over those axes (axis 0 most significant). The device at mesh
// position p has coordinates Coordinates(p); device_ids()[p] is its global id.
// Device ids are arbitrary non-negative integers in any order, so a mesh can
// express topology-aware orders such as [3, 1, 0, 2].
//
// Example: Mesh::Create({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7})
//   position 5 -> device 5, coordinates {1, 1} (data=1, model=1).
//   AxisGroups({"model"}) -> {{0, 1, 2, 3}, {4, 5, 6, 7}}   (one group per data index)
//   AxisGroups({"data"})  -> {{0, 4}, {1, 5}, {2, 6}, {3, 7}}
//
// A mesh holds no devices and does no I/O: it is pure geometry shared by the
// client and the server. Mesh is an immutable value type: copyable, and
// thread-compatible (const methods may be called concurrently).
#ifndef PLACEMENT_COMMON_MESH_H_
#define PLACEMENT_COMMON_MESH_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace placement {

struct MeshAxis {
  std::string name;
  int64_t size = 0;

  bool operator==(const MeshAxis&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const MeshAxis& a) {
    return H::combine(std::move(h), a.name, a.size);
  }
};

class Mesh {
 public:
  // Largest number of devices a mesh may hold; guards the size product against
  // overflow and absurd requests.
  static constexpr int64_t kMaxDevices = int64_t{1} << 20;

  // Builds a mesh over `device_ids`, laid out row-major over `axes`.
  // INVALID_ARGUMENT (the message names the field and the numbers) when: there
  // are no axes (use SingleDevice); an axis size is < 1; an axis name is empty,
  // duplicated or does not match [A-Za-z_][A-Za-z0-9_.-]{0,63};
  // device_ids.size() differs from the product of the axis sizes; a device id
  // is repeated or negative.
  static absl::StatusOr<Mesh> Create(std::vector<MeshAxis> axes, std::vector<int64_t> device_ids);

  // A mesh with zero axes holding exactly one device: the mesh of a
  // single-device placement. REQUIRES: device_id >= 0.
  static Mesh SingleDevice(int64_t device_id);

  const std::vector<MeshAxis>& axes() const { return axes_; }
  // Row-major over axes(); size num_devices().
  const std::vector<int64_t>& device_ids() const { return device_ids_; }
  int64_t num_devices() const { return static_cast<int64_t>(device_ids_.size()); }
  int num_axes() const { return static_cast<int>(axes_.size()); }

  // Index of the axis called `name`, or -1 when the mesh has no such axis.
  int AxisIndex(std::string_view name) const;
  std::vector<std::string> AxisNames() const;
  // Sizes of the axes, in axis order ({} for a single-device mesh).
  std::vector<int64_t> AxisSizes() const;

  // Mixed-radix coordinates of mesh position `position`, axis 0 most
  // significant; {} for a zero-axis mesh.
  // REQUIRES: 0 <= position < num_devices().
  std::vector<int64_t> Coordinates(int64_t position) const;
  // Inverse of Coordinates. REQUIRES: coordinates.size() == num_axes() and
  // each coordinate is inside its axis.
  int64_t PositionAt(const std::vector<int64_t>& coordinates) const;

  // Mesh position of `device_id`, or -1 when the device is not in the mesh.
  // O(num_devices()).
  int64_t PositionOf(int64_t device_id) const;

  // Groups of MESH POSITIONS for a collective over `axis_names` (empty = all
  // axes): positions that agree on every OTHER axis form one group. Groups are
  // ordered row-major by the other axes' coordinates; inside a group, positions
  // are ordered by the mixed-radix number of their coordinates on
  // `axis_names` in the listed order (first listed most significant) --
  // exactly the axis_index order of JAX's psum / all_gather over that tuple of
  // axes. A zero-axis mesh yields {{0}}.
  // INVALID_ARGUMENT for unknown or repeated axis names.
  absl::StatusOr<std::vector<std::vector<int64_t>>> AxisGroups(
      const std::vector<std::string>& axis_names) const;
  // AxisGroups with each mesh position replaced by its device id.
  absl::StatusOr<std::vector<std::vector<int64_t>>> AxisDeviceGroups(
      const std::vector<std::string>& axis_names) const;

  // "Mesh(data=4, model=2)"; "Mesh()" for a zero-axis mesh. Device ids are
  // not included (see DebugString).
  std::string ToString() const;
  // ToString plus the device ids: "Mesh(data=2; devices=[3, 1])".
  std::string DebugString() const;

  // Same axes (names, sizes, order) and same device ids in the same order.
  bool operator==(const Mesh& other) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const Mesh& m) {
    return H::combine(std::move(h), m.axes_, m.device_ids_);
  }

 private:
  Mesh(std::vector<MeshAxis> axes, std::vector<int64_t> device_ids)
      : axes_(std::move(axes)), device_ids_(std::move(device_ids)) {}

  std::vector<MeshAxis> axes_;
  std::vector<int64_t> device_ids_;
};

// OK when `name` matches [A-Za-z_][A-Za-z0-9_.-]{0,63}; INVALID_ARGUMENT
// naming `field` otherwise.
absl::Status ValidateAxisName(std::string_view name, std::string_view field);

}  // namespace placement

#endif  // PLACEMENT_COMMON_MESH_H_
