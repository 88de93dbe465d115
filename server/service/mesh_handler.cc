#include "server/service/mesh_handler.h"

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/rule_meshes.h"
#include "server/service/to_proto.h"
#include "server/service/unary.h"
#include "server/tensor/label_limits.h"
#include "server/tensor/list_page.h"

namespace placement::server {

namespace pb = placement::v1;

grpc::ServerUnaryReactor* MeshHandler::CreateMesh(grpc::CallbackServerContext* context,
                                                  const pb::CreateMeshRequest* request,
                                                  pb::CreateMeshResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    RETURN_IF_ERROR(CheckLength("mesh_id", request->mesh_id(), kMaxMeshIdLength));
    std::vector<int64_t> device_ids(request->device_ids().begin(), request->device_ids().end());
    absl::StatusOr<RegisteredMesh> mesh;
    switch (request->shape_case()) {
      case pb::CreateMeshRequest::kAxes: {
        std::vector<MeshAxis> axes;
        for (const pb::MeshAxis& axis : request->axes().axes()) {
          axes.push_back(MeshAxis{axis.name(), axis.size()});
        }
        mesh = meshes_->Create(request->mesh_id(), std::move(axes), std::move(device_ids),
                               caller.tenant);
        break;
      }
      case pb::CreateMeshRequest::kDataParallel:
        mesh = meshes_->CreateFromPreset(
            request->mesh_id(),
            OneAxisPresetFromProto(MeshPresetKind::kDataParallel, request->data_parallel()),
            std::move(device_ids), caller.tenant);
        break;
      case pb::CreateMeshRequest::kModelParallel:
        mesh = meshes_->CreateFromPreset(
            request->mesh_id(),
            OneAxisPresetFromProto(MeshPresetKind::kModelParallel, request->model_parallel()),
            std::move(device_ids), caller.tenant);
        break;
      case pb::CreateMeshRequest::kHybrid:
        mesh =
            meshes_->CreateFromPreset(request->mesh_id(), HybridPresetFromProto(request->hybrid()),
                                      std::move(device_ids), caller.tenant);
        break;
      case pb::CreateMeshRequest::SHAPE_NOT_SET:
        // An empty axes list: Mesh::Create's "mesh axes are empty" error.
        mesh = meshes_->Create(request->mesh_id(), {}, std::move(device_ids), caller.tenant);
        break;
    }
    if (!mesh.ok()) return mesh.status();
    if (!caller.session_id.empty() && sessions_ != nullptr) {
      // A mesh made in a session goes with it. Tagged first, then checked:
      // a session that ended meanwhile either found the tag (and deleted
      // the mesh) or is seen ended here.
      RETURN_IF_ERROR(meshes_->TagSession(mesh->id, caller.session_id));
      if (!sessions_->IsOpen(caller.session_id)) {
        ops_->DeleteMesh(mesh->id, /*force=*/false).IgnoreError();
        return absl::FailedPreconditionError(
            absl::StrCat("session '", caller.session_id,
                         "' ended while the mesh was created; the mesh was deleted"));
      }
      mesh->session_id = caller.session_id;
    }
    MeshToProto(*mesh, 0, response->mutable_mesh());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::GetMesh(grpc::CallbackServerContext* context,
                                               const pb::GetMeshRequest* request,
                                               pb::GetMeshResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    ASSIGN_OR_RETURN(RegisteredMesh mesh, GetVisibleMesh(*meshes_, caller, request->mesh_id()));
    MeshToProto(mesh, ops_->store()->CountUsingMesh(mesh.id), response->mutable_mesh());
    response->set_total_devices(mesh.mesh.num_devices());
    for (const MeshAxis& axis : mesh.mesh.axes())
      (*response->mutable_axes())[axis.name] = axis.size;
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::ListMeshes(grpc::CallbackServerContext* context,
                                                  const pb::ListMeshesRequest* request,
                                                  pb::ListMeshesResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    std::vector<RegisteredMesh> visible;
    std::vector<std::string> ids;
    for (RegisteredMesh& mesh : meshes_->List()) {  // sorted by id
      if (!caller.Sees(mesh.tenant)) continue;
      ids.push_back(mesh.id);
      visible.push_back(std::move(mesh));
    }
    ASSIGN_OR_RETURN(KeyPage page, PageOfKeys(ids, request->page_size(), request->page_token()));
    for (size_t i = page.begin; i < page.end; ++i) {
      MeshToProto(visible[i], ops_->store()->CountUsingMesh(visible[i].id), response->add_meshes());
    }
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* MeshHandler::DeleteMesh(grpc::CallbackServerContext* context,
                                                  const pb::DeleteMeshRequest* request,
                                                  pb::DeleteMeshResponse* response) {
  return RunUnary(context, *gate_, [&](const Caller& caller) -> absl::Status {
    RETURN_IF_ERROR(GetVisibleMesh(*meshes_, caller, request->mesh_id()).status());
    // A mesh is one tenant's, but an admin may have placed another tenant's
    // tensors on it; a forced delete by a user must not take those with it.
    if (request->force() && !caller.admin()) {
      for (const auto& tensor : ops_->store()->List({"", request->mesh_id()})) {
        if (!caller.Sees(tensor->owner.tenant)) {
          return absl::FailedPreconditionError(absl::StrCat(
              "mesh '", request->mesh_id().substr(0, 64),
              "' is used by tensors of other tenants; only an admin may force its deletion"));
        }
      }
    }
    ASSIGN_OR_RETURN(int64_t deleted, ops_->DeleteMesh(request->mesh_id(), request->force()));
    response->set_deleted_tensors(deleted);
    return absl::OkStatus();
  });
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
MeshHandler::MeshHandler(MeshRegistry* meshes, const TensorOps* ops, CallGate* gate)
    : meshes_(meshes), ops_(ops), gate_(gate) {}
MeshHandler::~MeshHandler() = default;

}  // namespace placement::server
