// Tenant checks on the meshes a request names: a registered mesh of another
// tenant is NOT_FOUND, with the registry's own words ("mesh 'x' does not
// exist"), whether it is asked for by id (GetMesh, DeleteMesh) or named in a
// placement rule (Upload, UploadBatch, Place, Assemble, Prefetch). Proto
// types: this is edge code. Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_RULE_MESHES_H_
#define PLACEMENT_SERVER_SERVICE_RULE_MESHES_H_

#include <string>

#include "absl/status/statusor.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/auth/caller.h"
#include "server/mesh/mesh_registry.h"

namespace placement::server {

// The mesh `id` if `caller` sees it; ids longer than kMaxMeshIdLength are
// INVALID_ARGUMENT without echo.
absl::StatusOr<RegisteredMesh> GetVisibleMesh(const MeshRegistry& meshes, const Caller& caller,
                                              const std::string& id);

// OK when every registered mesh `rule` / `placement` names is visible to
// `caller`. Unknown ids pass (the resolver reports them as before).
absl::Status CheckRuleMeshesVisible(const MeshRegistry& meshes, const Caller& caller,
                                    const placement::v1::PlacementRule& rule);
absl::Status CheckPlacementMeshVisible(const MeshRegistry& meshes, const Caller& caller,
                                       const placement::v1::Placement& placement);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_RULE_MESHES_H_
