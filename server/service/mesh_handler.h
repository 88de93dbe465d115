// gRPC front for placement.v1.MeshService: translates protos to
// MeshRegistry / TensorOps calls and back. No logic of its own.
// Thread-safe (the components are).
#ifndef PLACEMENT_SERVER_SERVICE_MESH_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_MESH_HANDLER_H_

#include "placement/v1/mesh_service.grpc.pb.h"
#include "server/mesh/mesh_registry.h"
#include "server/service/call_gate.h"
#include "server/session/session_manager.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

class MeshHandler final : public placement::v1::MeshService::CallbackService {
 public:
  // REQUIRES: every argument outlives the handler.
  MeshHandler(MeshRegistry* meshes, const TensorOps* ops, CallGate* gate);
  ~MeshHandler() override;
  // Meshes created by calls joined to a session go with it (unset: meshes
  // are durable). REQUIRES: before serving; `sessions` outlives the handler.
  void set_sessions(const SessionManager* sessions) { sessions_ = sessions; }

  grpc::ServerUnaryReactor* CreateMesh(grpc::CallbackServerContext* context,
                                       const placement::v1::CreateMeshRequest* request,
                                       placement::v1::CreateMeshResponse* response) override;
  grpc::ServerUnaryReactor* GetMesh(grpc::CallbackServerContext* context,
                                    const placement::v1::GetMeshRequest* request,
                                    placement::v1::GetMeshResponse* response) override;
  grpc::ServerUnaryReactor* ListMeshes(grpc::CallbackServerContext* context,
                                       const placement::v1::ListMeshesRequest* request,
                                       placement::v1::ListMeshesResponse* response) override;
  grpc::ServerUnaryReactor* DeleteMesh(grpc::CallbackServerContext* context,
                                       const placement::v1::DeleteMeshRequest* request,
                                       placement::v1::DeleteMeshResponse* response) override;

 private:
  MeshRegistry* meshes_;
  const TensorOps* ops_;
  CallGate* gate_;
  const SessionManager* sessions_ = nullptr;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_MESH_HANDLER_H_
