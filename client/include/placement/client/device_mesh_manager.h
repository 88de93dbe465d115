// DeviceMeshManager: a facade named after the seed's artifex
// DeviceMeshManager, over MeshClient. Method names follow the seed (snake
// case) so Python code ports line by line; meshes live in the daemon and are
// returned as Mesh values.
//
//   auto manager = DeviceMeshManager::Create(*client);   // all devices
//   auto mesh = manager->create_device_mesh({{"data", 2}, {"model", 1}});
//   auto dp = manager->create_data_parallel_mesh();       // all devices, "data"
//   auto info = manager->get_mesh_info(*mesh);            // {total_devices, axes}
//
// Too many devices is FAILED_PRECONDITION "Not enough devices: mesh requires
// {total} devices but only {n} available." (the seed's ValueError text);
// fewer uses the first devices in the manager's order (the daemon's topology
// order unless the manager was given devices). Sizes < 1 are
// INVALID_ARGUMENT (the seed let {"data": -1} through).
//
// Thread-compatible; the Client must outlive the manager.
#ifndef PLACEMENT_CLIENT_DEVICE_MESH_MANAGER_H_
#define PLACEMENT_CLIENT_DEVICE_MESH_MANAGER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/meshes.h"
#include "placement/client/rules.h"

namespace placement::client {

class DeviceMeshManager {
 public:
  // DeviceMeshManager(devices=None): `devices` restricts and orders the
  // devices meshes are built from (global ids); nullopt = every device, in
  // the daemon's topology order. NOT_FOUND for an unknown device id,
  // INVALID_ARGUMENT for a repeated one.
  static absl::StatusOr<DeviceMeshManager> Create(
      const Client& client, std::optional<std::vector<int64_t>> devices = std::nullopt);

  // The `num_devices` and `devices` properties.
  int64_t num_devices() const { return static_cast<int64_t>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }

  // create_device_mesh(mesh_shape, devices=None): the dict and list forms are
  // both an ordered MeshAxes. `devices` overrides the manager's devices.
  absl::StatusOr<Mesh> create_device_mesh(
      const MeshAxes& mesh_shape,
      const std::optional<std::vector<int64_t>>& devices = std::nullopt) const;
  // create_data_parallel_mesh(num_devices=None, axis_name="data").
  absl::StatusOr<Mesh> create_data_parallel_mesh(std::optional<int64_t> num_devices = std::nullopt,
                                                 const std::string& axis_name = "data") const;
  // create_model_parallel_mesh(num_devices=None, axis_name="model").
  absl::StatusOr<Mesh> create_model_parallel_mesh(std::optional<int64_t> num_devices = std::nullopt,
                                                  const std::string& axis_name = "model") const;
  // create_hybrid_mesh(data_parallel_size=1, model_parallel_size=1,
  // data_axis="data", model_axis="model"): shape (dp, mp), device k at
  // (k // mp, k % mp).
  absl::StatusOr<Mesh> create_hybrid_mesh(int64_t data_parallel_size = 1,
                                          int64_t model_parallel_size = 1,
                                          const std::string& data_axis = "data",
                                          const std::string& model_axis = "model") const;
  // get_mesh_info(mesh): {"total_devices", "axes" in mesh order}. Asks the
  // daemon, so a stale or deleted mesh is NOT_FOUND.
  absl::StatusOr<MeshInfo> get_mesh_info(const MeshRef& mesh) const;

  const MeshClient& meshes() const { return meshes_; }

 private:
  DeviceMeshManager(const Client& client, std::vector<Device> devices, bool explicit_devices)
      : meshes_(client), devices_(std::move(devices)), explicit_devices_(explicit_devices) {}

  // Device ids for a mesh of `total` devices: empty (the daemon picks) when
  // the manager uses every device, else the first `total` of the manager's.
  absl::StatusOr<std::vector<int64_t>> PickDevices(int64_t total) const;
  // Options for a one-axis preset over this manager's devices; resolves an
  // unset `num_devices` to all of them when devices were given explicitly.
  absl::StatusOr<CreateMeshOptions> OneAxisOptions(std::optional<int64_t>* num_devices) const;

  MeshClient meshes_;
  std::vector<Device> devices_;
  bool explicit_devices_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_DEVICE_MESH_MANAGER_H_
