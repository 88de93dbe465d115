// MeshRegistry: named device meshes (JAX Mesh; seed DeviceMeshManager),
// validated against the devices the daemon owns. Meshes are immutable values
// once registered; the registry owns the id -> mesh map. Whether tensors
// still use a mesh is the TensorStore's business (see DeleteMeshAndTensors
// in server/tensor/mesh_tensors.h).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_MESH_MESH_REGISTRY_H_
#define PLACEMENT_SERVER_MESH_MESH_REGISTRY_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/mesh.h"
#include "server/device/device_inventory.h"
#include "server/mesh/mesh_presets.h"

namespace placement::server {

struct RegisteredMesh {
  std::string id;
  Mesh mesh;
  // The tenant that created it (server/auth/caller.h); other tenants see
  // the id as unknown. Empty: the implicit tenant.
  std::string tenant;
  // The session whose call created it (empty: durable). The mesh is deleted
  // when that session ends, unless tensors that outlive the session
  // (persisted ones) still use it: then it becomes durable with them.
  std::string session_id;
};

class MeshRegistry {
 public:
  // REQUIRES: inventory outlives the registry.
  explicit MeshRegistry(const DeviceInventory* inventory) : inventory_(inventory) {}

  // Registers a mesh over `axes`. `device_ids` empty: the first N devices in
  // topology order (TopologyOrder). `id` empty: a generated "mesh-N".
  // INVALID_ARGUMENT: Mesh::Create's errors, unknown/repeated device ids,
  // malformed id. FAILED_PRECONDITION: "Not enough devices: mesh requires 16
  // devices but only 8 available." ALREADY_EXISTS: id taken.
  absl::StatusOr<RegisteredMesh> Create(std::string id, std::vector<MeshAxis> axes,
                                        std::vector<int64_t> device_ids, std::string tenant = {});
  // Create over PresetAxes(preset, n), where n ("all devices") is
  // device_ids.size() when device ids are given, else every device.
  absl::StatusOr<RegisteredMesh> CreateFromPreset(std::string id, const MeshPreset& preset,
                                                  std::vector<int64_t> device_ids,
                                                  std::string tenant = {});
  // In a cluster, meshes are registered by the coordinator
  // (server/cluster/cluster_meshes.h): with a publisher set, Create and
  // CreateFromPreset resolve and validate here, then return what
  // `publish(resolved)` returns -- the mesh as the cluster registered it,
  // which the publisher has installed here. REQUIRES: set before serving.
  using Publisher = std::function<absl::StatusOr<RegisteredMesh>(const RegisteredMesh& resolved)>;
  void set_publisher(Publisher publisher) { publisher_ = std::move(publisher); }
  // Registers an already resolved mesh here, generating "mesh-N" for an
  // empty id: what the coordinator does with a published mesh.
  // ALREADY_EXISTS: id taken.
  absl::StatusOr<RegisteredMesh> Register(RegisteredMesh mesh);
  // Inserts or replaces `mesh` (a replica pushed by the coordinator).
  void Install(RegisteredMesh mesh);

  // NOT_FOUND: "mesh 'x' does not exist".
  absl::StatusOr<RegisteredMesh> Get(const std::string& id) const;
  std::vector<RegisteredMesh> List() const;  // by id
  // NOT_FOUND for unknown ids.
  absl::Status Delete(const std::string& id);
  int64_t size() const;
  // Session scoping (RegisteredMesh::session_id). NOT_FOUND for an unknown
  // id. SessionMeshes lists the ids tagged with `session_id`; MakeDurable
  // clears a mesh's tag.
  absl::Status TagSession(const std::string& id, const std::string& session_id);
  std::vector<std::string> SessionMeshes(const std::string& session_id) const;
  void MakeDurable(const std::string& id);
  // Every device id the daemon owns, in TopologyOrder.
  std::vector<int64_t> TopologyOrderedDevices() const;
  const DeviceInventory* inventory() const { return inventory_; }

 private:
  const DeviceInventory* inventory_;
  Publisher publisher_;
  mutable absl::Mutex mu_;
  std::map<std::string, RegisteredMesh> meshes_ ABSL_GUARDED_BY(mu_);
  int64_t next_id_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_MESH_MESH_REGISTRY_H_
