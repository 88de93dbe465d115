#include "placement/client/device_mesh_manager.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"

namespace placement::client {
namespace {

// Product of the sizes, or nullopt when a size is < 1 or the product
// overflows (the daemon reports those with the exact field).
std::optional<int64_t> Product(const std::vector<int64_t>& sizes) {
  int64_t total = 1;
  for (int64_t s : sizes) {
    if (s < 1 || total > std::numeric_limits<int64_t>::max() / s) return std::nullopt;
    total *= s;
  }
  return total;
}

}  // namespace

absl::StatusOr<DeviceMeshManager> DeviceMeshManager::Create(
    const Client& client, std::optional<std::vector<int64_t>> devices) {
  auto all = client.ListDevices();
  if (!all.ok()) return all.status();
  if (!devices.has_value()) return DeviceMeshManager(client, *std::move(all), false);
  std::vector<Device> chosen;
  std::set<int64_t> seen;
  for (size_t i = 0; i < devices->size(); ++i) {
    int64_t id = (*devices)[i];
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("devices[", i, "]: device ", id, " is listed twice"));
    }
    const Device* found = nullptr;
    for (const auto& d : *all) {
      if (d.id == id) found = &d;
    }
    if (found == nullptr) {
      return absl::NotFoundError(absl::StrCat("devices[", i, "]: device ", id,
                                              " does not exist (the daemon has ", all->size(),
                                              " devices)"));
    }
    chosen.push_back(*found);
  }
  return DeviceMeshManager(client, std::move(chosen), true);
}

absl::StatusOr<std::vector<int64_t>> DeviceMeshManager::PickDevices(int64_t total) const {
  if (!explicit_devices_) return std::vector<int64_t>{};
  if (total > num_devices()) {
    return absl::FailedPreconditionError(absl::StrCat("Not enough devices: mesh requires ", total,
                                                      " devices but only ", num_devices(),
                                                      " available."));
  }
  std::vector<int64_t> ids;
  for (int64_t i = 0; i < total; ++i) ids.push_back(devices_[i].id);
  return ids;
}

absl::StatusOr<Mesh> DeviceMeshManager::create_device_mesh(
    const MeshAxes& mesh_shape, const std::optional<std::vector<int64_t>>& devices) const {
  std::vector<int64_t> sizes;
  for (const auto& axis : mesh_shape) sizes.push_back(axis.size);
  std::optional<int64_t> total = Product(sizes);
  CreateMeshOptions options;
  if (total.has_value() && !mesh_shape.empty()) {
    if (devices.has_value()) {
      if (*total > static_cast<int64_t>(devices->size())) {
        return absl::FailedPreconditionError(absl::StrCat("Not enough devices: mesh requires ",
                                                          *total, " devices but only ",
                                                          devices->size(), " available."));
      }
      options.device_ids.assign(devices->begin(), devices->begin() + *total);
    } else {
      auto picked = PickDevices(*total);
      if (!picked.ok()) return picked.status();
      options.device_ids = *std::move(picked);
    }
  }
  return meshes_.Create(mesh_shape, options);
}

absl::StatusOr<CreateMeshOptions> DeviceMeshManager::OneAxisOptions(
    std::optional<int64_t>* num_devices) const {
  CreateMeshOptions options;
  if (explicit_devices_) {
    int64_t n = num_devices->value_or(this->num_devices());
    if (n >= 1) {
      auto picked = PickDevices(n);
      if (!picked.ok()) return picked.status();
      options.device_ids = *std::move(picked);
    }
    *num_devices = n;
  }
  return options;
}

absl::StatusOr<Mesh> DeviceMeshManager::create_data_parallel_mesh(
    std::optional<int64_t> num_devices, const std::string& axis_name) const {
  auto options = OneAxisOptions(&num_devices);
  if (!options.ok()) return options.status();
  return meshes_.CreateDataParallel(num_devices, axis_name, *options);
}

absl::StatusOr<Mesh> DeviceMeshManager::create_model_parallel_mesh(
    std::optional<int64_t> num_devices, const std::string& axis_name) const {
  auto options = OneAxisOptions(&num_devices);
  if (!options.ok()) return options.status();
  return meshes_.CreateModelParallel(num_devices, axis_name, *options);
}

absl::StatusOr<Mesh> DeviceMeshManager::create_hybrid_mesh(int64_t data_parallel_size,
                                                           int64_t model_parallel_size,
                                                           const std::string& data_axis,
                                                           const std::string& model_axis) const {
  CreateMeshOptions options;
  std::optional<int64_t> total = Product({data_parallel_size, model_parallel_size});
  if (explicit_devices_ && total.has_value()) {
    auto picked = PickDevices(*total);
    if (!picked.ok()) return picked.status();
    options.device_ids = *std::move(picked);
  }
  return meshes_.CreateHybrid(data_parallel_size, model_parallel_size, data_axis, model_axis,
                              options);
}

absl::StatusOr<MeshInfo> DeviceMeshManager::get_mesh_info(const MeshRef& mesh) const {
  return meshes_.Get(mesh.id());
}

}  // namespace placement::client
