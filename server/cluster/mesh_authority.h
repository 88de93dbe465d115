// MeshAuthority: the cluster-wide mesh registry as the coordinator serves it
// (ClusterService.CreateMesh / DeleteMesh / ListMeshes). Implemented by
// ClusterMeshes (cluster_meshes.h) over the coordinator daemon's own
// MeshRegistry, pushing every change to the other daemons before returning.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_MESH_AUTHORITY_H_
#define PLACEMENT_SERVER_CLUSTER_MESH_AUTHORITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/mesh.h"
#include "server/mesh/mesh_registry.h"

namespace placement::server {

class MeshAuthority {
 public:
  virtual ~MeshAuthority() = default;

  // MeshRegistry::Create's errors; the mesh exists on every live daemon
  // when this returns.
  virtual absl::StatusOr<RegisteredMesh> CreateMesh(const std::string& tenant,
                                                    const std::string& mesh_id,
                                                    std::vector<MeshAxis> axes,
                                                    std::vector<int64_t> device_ids) = 0;
  // NOT_FOUND for unknown meshes (or another tenant's, unless admin);
  // FAILED_PRECONDITION while tensors use it and !force. Returns the
  // tensors deleted with it.
  virtual absl::StatusOr<int64_t> DeleteMesh(const std::string& mesh_id, const std::string& tenant,
                                             bool admin, bool force) = 0;
  virtual std::vector<RegisteredMesh> ListMeshes() const = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_MESH_AUTHORITY_H_
