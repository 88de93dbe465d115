// gRPC front for placement.v1.ClusterService, served by the coordinator
// (process 0's daemon) on its peer port: translates protos to Coordinator
// (membership, key-value store, barriers) and MeshAuthority calls. No logic
// of its own. Callers are daemons (peer_unary.h).
//
// Thread-safe (the components are). Calls that wait (Join, KeyValueGet,
// Barrier) hold no thread while they wait: the coordinator completes them
// (RunPeerAsync), bounded by their timeout (at most kMaxWait).
#ifndef PLACEMENT_SERVER_SERVICE_CLUSTER_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_CLUSTER_HANDLER_H_

#include "placement/v1/cluster_service.grpc.pb.h"
#include "server/cluster/coordinator.h"
#include "server/cluster/mesh_authority.h"
#include "server/service/call_gate.h"

namespace placement::server {

class ClusterHandler final : public placement::v1::ClusterService::CallbackService {
 public:
  // Longest wait a blocking call may ask for.
  static constexpr absl::Duration kMaxWait = absl::Hours(1);

  // REQUIRES: every argument outlives the handler; `meshes` may be set
  // later (set_meshes) but before daemons call the mesh RPCs.
  ClusterHandler(Coordinator* coordinator, CallGate* gate);
  ~ClusterHandler() override;
  void set_meshes(MeshAuthority* meshes) { meshes_ = meshes; }

  grpc::ServerUnaryReactor* Join(grpc::CallbackServerContext* context,
                                 const placement::v1::JoinRequest* request,
                                 placement::v1::JoinResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const placement::v1::HeartbeatRequest* request,
                                      placement::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* Leave(grpc::CallbackServerContext* context,
                                  const placement::v1::LeaveRequest* request,
                                  placement::v1::LeaveResponse* response) override;
  grpc::ServerUnaryReactor* GetTopology(grpc::CallbackServerContext* context,
                                        const placement::v1::GetTopologyRequest* request,
                                        placement::v1::Topology* response) override;
  grpc::ServerUnaryReactor* KeyValueSet(grpc::CallbackServerContext* context,
                                        const placement::v1::KeyValueSetRequest* request,
                                        placement::v1::KeyValueSetResponse* response) override;
  grpc::ServerUnaryReactor* KeyValueGet(grpc::CallbackServerContext* context,
                                        const placement::v1::KeyValueGetRequest* request,
                                        placement::v1::KeyValueGetResponse* response) override;
  grpc::ServerUnaryReactor* KeyValueDelete(
      grpc::CallbackServerContext* context, const placement::v1::KeyValueDeleteRequest* request,
      placement::v1::KeyValueDeleteResponse* response) override;
  grpc::ServerUnaryReactor* Barrier(grpc::CallbackServerContext* context,
                                    const placement::v1::BarrierRequest* request,
                                    placement::v1::BarrierResponse* response) override;
  grpc::ServerUnaryReactor* ReportContextFailure(
      grpc::CallbackServerContext* context,
      const placement::v1::ReportContextFailureRequest* request,
      placement::v1::ReportContextFailureResponse* response) override;
  grpc::ServerUnaryReactor* CreateMesh(grpc::CallbackServerContext* context,
                                       const placement::v1::ClusterCreateMeshRequest* request,
                                       placement::v1::ClusterCreateMeshResponse* response) override;
  grpc::ServerUnaryReactor* DeleteMesh(grpc::CallbackServerContext* context,
                                       const placement::v1::ClusterDeleteMeshRequest* request,
                                       placement::v1::ClusterDeleteMeshResponse* response) override;
  grpc::ServerUnaryReactor* ListMeshes(grpc::CallbackServerContext* context,
                                       const placement::v1::ClusterListMeshesRequest* request,
                                       placement::v1::ClusterListMeshesResponse* response) override;

 private:
  absl::Status CheckMeshes() const;

  Coordinator* coordinator_;
  CallGate* gate_;
  MeshAuthority* meshes_ = nullptr;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_CLUSTER_HANDLER_H_
