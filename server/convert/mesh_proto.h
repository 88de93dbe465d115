// Wire <-> core for meshes, shared by both gRPC edges (the public
// MeshService handler and the daemon-to-daemon InstallMesh), so both
// convert alike.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_CONVERT_MESH_PROTO_H_
#define PLACEMENT_SERVER_CONVERT_MESH_PROTO_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "placement/v1/types.pb.h"
#include "server/mesh/mesh_registry.h"

namespace placement::server {

// A registered mesh with the number of tensors using it.
void MeshToProto(const RegisteredMesh& mesh, int64_t tensor_count, placement::v1::Mesh* out);

// The mesh of `proto` (axes and device ids; its id is the caller's).
// INVALID_ARGUMENT as Mesh::Create.
absl::StatusOr<Mesh> MeshFromProto(const placement::v1::Mesh& proto);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CONVERT_MESH_PROTO_H_
