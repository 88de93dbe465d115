#include "server/service/mesh_handler.h"

#include <optional>
#include <string>
#include <vector>

#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"

namespace placement::server {

namespace pb = placement::v1;

grpc::ServerUnaryReactor* MeshHandler::CreateMesh(grpc::CallbackServerContext* context,
                                                  const pb::CreateMeshRequest* request,
                                                  pb::CreateMeshResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    std::vector<int64_t> device_ids(request->device_ids().begin(), request->device_ids().end());
    absl::StatusOr<RegisteredMesh> mesh;
    switch (request->shape_case()) {
      case pb::CreateMeshRequest::kAxes: {
        std::vector<MeshAxis> axes;
        for (const pb::MeshAxis& axis : request->axes().axes()) {
          axes.push_back(MeshAxis{axis.name(), axis.size()});
        }
        mesh = meshes_->Create(request->mesh_id(), std::move(axes), std::move(device_ids));
        break;
      }
      case pb::CreateMeshRequest::kDataParallel:
        mesh = meshes_->CreateFromPreset(
            request->mesh_id(),
            OneAxisPresetFromProto(MeshPresetKind::kDataParallel, request->data_parallel()),
            std::move(device_ids));
        break;
      case pb::CreateMeshRequest::kModelParallel:
        mesh = meshes_->CreateFromPreset(
            request->mesh_id(),
            OneAxisPresetFromProto(MeshPresetKind::kModelParallel, request->model_parallel()),
            std::move(device_ids));
        break;
      case pb::CreateMeshRequest::kHybrid:
        mesh = meshes_->CreateFromPreset(
            request->mesh_id(), HybridPresetFromProto(request->hybrid()), std::move(device_ids));
        break;
      case pb::CreateMeshRequest::SHAPE_NOT_SET:
        // An empty axes list: Mesh::Create's "mesh axes are empty" error.
        mesh = meshes_->Create(request->mesh_id(), {}, std::move(device_ids));
        break;
    }
    if (!mesh.ok()) return mesh.status();
    MeshToProto(*mesh, 0, response->mutable_mesh());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::GetMesh(grpc::CallbackServerContext* context,
                                               const pb::GetMeshRequest* request,
                                               pb::GetMeshResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(request->mesh_id()));
    MeshToProto(mesh, ops_->store()->CountUsingMesh(mesh.id), response->mutable_mesh());
    response->set_total_devices(mesh.mesh.num_devices());
    for (const MeshAxis& axis : mesh.mesh.axes())
      (*response->mutable_axes())[axis.name] = axis.size;
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::ListMeshes(grpc::CallbackServerContext* context,
                                                  const pb::ListMeshesRequest* /*request*/,
                                                  pb::ListMeshesResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    for (const RegisteredMesh& mesh : meshes_->List()) {
      MeshToProto(mesh, ops_->store()->CountUsingMesh(mesh.id), response->add_meshes());
    }
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::DeleteMesh(grpc::CallbackServerContext* context,
                                                  const pb::DeleteMeshRequest* request,
                                                  pb::DeleteMeshResponse* response) {
  return RunUnary(context, *gate_, [&]() -> absl::Status {
    ASSIGN_OR_RETURN(int64_t deleted, ops_->DeleteMesh(request->mesh_id(), request->force()));
    response->set_deleted_tensors(deleted);
    return absl::OkStatus();
  });
}

}  // namespace placement::server
