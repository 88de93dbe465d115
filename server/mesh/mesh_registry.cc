#include "server/mesh/mesh_registry.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/mesh/topology.h"

namespace placement::server {
namespace {

constexpr size_t kMaxMeshIdLength = 64;

bool IsMeshIdChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

absl::Status ValidateMeshId(const std::string& id) {
  bool ok = !id.empty() && id.size() <= kMaxMeshIdLength;
  for (size_t i = 0; ok && i < id.size(); ++i) ok = IsMeshIdChar(id[i]);
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat("mesh_id '", id, "' (", id.size(),
                                                   " characters) must match [A-Za-z0-9_.-]{1,64}"));
  }
  return absl::OkStatus();
}

// Product of the axis sizes when every size is in [1, Mesh::kMaxDevices] and
// the product stays within it; -1 otherwise (Mesh::Create names the problem).
int64_t DeviceCount(const std::vector<MeshAxis>& axes) {
  if (axes.empty()) return -1;
  int64_t total = 1;
  for (const MeshAxis& axis : axes) {
    if (axis.size < 1 || axis.size > Mesh::kMaxDevices || total > Mesh::kMaxDevices / axis.size) {
      return -1;
    }
    total *= axis.size;
  }
  return total;
}

// Mesh::Create's name checks, for requests refused before a mesh is built.
absl::Status ValidateAxisNames(const std::vector<MeshAxis>& axes) {
  absl::flat_hash_set<std::string> names;
  for (size_t i = 0; i < axes.size(); ++i) {
    const std::string field = absl::StrCat("axes[", i, "].name");
    RETURN_IF_ERROR(ValidateAxisName(axes[i].name, field));
    if (!names.insert(axes[i].name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " '", axes[i].name, "' is a duplicate; axis names must be unique"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RegisteredMesh> MeshRegistry::Create(std::string id, std::vector<MeshAxis> axes,
                                                    std::vector<int64_t> device_ids,
                                                    std::string tenant) {
  if (!id.empty()) RETURN_IF_ERROR(ValidateMeshId(id));
  const int64_t available = inventory_->num_devices();
  const int64_t total = DeviceCount(axes);
  if (total < 0) return Mesh::Create(std::move(axes), std::move(device_ids)).status();
  if (total > available) {
    RETURN_IF_ERROR(ValidateAxisNames(axes));
    return absl::FailedPreconditionError(absl::StrCat("Not enough devices: mesh requires ", total,
                                                      " devices but only ", available,
                                                      " available."));
  }
  if (device_ids.empty()) {
    device_ids = TopologyOrderedDevices();
    device_ids.resize(total);
  } else {
    for (size_t i = 0; i < device_ids.size(); ++i) {
      absl::StatusOr<DeviceDescription> found = inventory_->Find(device_ids[i]);
      if (!found.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("device_ids[", i, "]: ", found.status().message()));
      }
    }
  }
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(std::move(axes), std::move(device_ids)));
  RegisteredMesh resolved{std::move(id), std::move(mesh), std::move(tenant)};
  if (publisher_) return publisher_(resolved);
  return Register(std::move(resolved));
}

absl::StatusOr<RegisteredMesh> MeshRegistry::Register(RegisteredMesh mesh) {
  if (!mesh.id.empty()) RETURN_IF_ERROR(ValidateMeshId(mesh.id));
  absl::MutexLock lock(&mu_);
  if (mesh.id.empty()) {
    do {
      mesh.id = absl::StrCat("mesh-", next_id_++);
    } while (meshes_.contains(mesh.id));
  } else if (meshes_.contains(mesh.id)) {
    return absl::AlreadyExistsError(absl::StrCat("mesh '", mesh.id, "' already exists"));
  }
  meshes_.emplace(mesh.id, mesh);
  return mesh;
}

void MeshRegistry::Install(RegisteredMesh mesh) {
  absl::MutexLock lock(&mu_);
  const std::string id = mesh.id;
  meshes_.insert_or_assign(id, std::move(mesh));
}

absl::StatusOr<RegisteredMesh> MeshRegistry::CreateFromPreset(std::string id,
                                                              const MeshPreset& preset,
                                                              std::vector<int64_t> device_ids,
                                                              std::string tenant) {
  const int64_t available =
      device_ids.empty() ? inventory_->num_devices() : static_cast<int64_t>(device_ids.size());
  ASSIGN_OR_RETURN(std::vector<MeshAxis> axes, PresetAxes(preset, available));
  return Create(std::move(id), std::move(axes), std::move(device_ids), std::move(tenant));
}

absl::StatusOr<RegisteredMesh> MeshRegistry::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = meshes_.find(id);
  if (it == meshes_.end()) {
    return absl::NotFoundError(absl::StrCat("mesh '", id, "' does not exist"));
  }
  return it->second;
}

std::vector<RegisteredMesh> MeshRegistry::List() const {
  absl::MutexLock lock(&mu_);
  std::vector<RegisteredMesh> out;
  out.reserve(meshes_.size());
  for (const auto& [id, mesh] : meshes_) out.push_back(mesh);
  return out;
}

absl::Status MeshRegistry::Delete(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (meshes_.erase(id) == 0) {
    return absl::NotFoundError(absl::StrCat("mesh '", id, "' does not exist"));
  }
  return absl::OkStatus();
}

absl::Status MeshRegistry::TagSession(const std::string& id, const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  auto it = meshes_.find(id);
  if (it == meshes_.end())
    return absl::NotFoundError(absl::StrCat("mesh '", id, "' does not exist"));
  it->second.session_id = session_id;
  return absl::OkStatus();
}

std::vector<std::string> MeshRegistry::SessionMeshes(const std::string& session_id) const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> ids;
  for (const auto& [id, mesh] : meshes_) {
    if (!session_id.empty() && mesh.session_id == session_id) ids.push_back(id);
  }
  return ids;
}

void MeshRegistry::MakeDurable(const std::string& id) {
  absl::MutexLock lock(&mu_);
  if (auto it = meshes_.find(id); it != meshes_.end()) it->second.session_id.clear();
}

int64_t MeshRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(meshes_.size());
}

std::vector<int64_t> MeshRegistry::TopologyOrderedDevices() const {
  // Process by process (a cluster's), each in its own topology order, so
  // the innermost mesh axes stay inside a node.
  std::vector<int64_t> out;
  const std::vector<DeviceDescription>& devices = inventory_->Devices();
  for (size_t begin = 0; begin < devices.size();) {
    size_t end = begin;
    while (end < devices.size() && devices[end].process_index == devices[begin].process_index)
      ++end;
    std::vector<int64_t> ordered = TopologyOrder(
        std::vector<DeviceDescription>(devices.begin() + begin, devices.begin() + end));
    out.insert(out.end(), ordered.begin(), ordered.end());
    begin = end;
  }
  return out;
}

}  // namespace placement::server
