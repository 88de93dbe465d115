// gRPC front for placement.v1.PeerService (daemon to daemon, on the peer
// port): translates protos to ClusterTensors / ClusterMeshes / the data
// plane (server/cluster/cluster_ops.h) and back. No logic of its own.
// Callers are daemons (peer_unary.h).
//
// Thread-safe (the components are).
#ifndef PLACEMENT_SERVER_SERVICE_PEER_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_PEER_HANDLER_H_

#include "placement/v1/peer_service.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_meshes.h"
#include "server/cluster/cluster_tensors.h"
#include "server/common/worker_pool.h"
#include "server/device/device_inventory.h"
#include "server/service/call_gate.h"

namespace placement::server {

class ClusterCollectives;
class ClusterOps;

class PeerHandler final : public placement::v1::PeerService::CallbackService {
 public:
  // REQUIRES: every argument outlives the handler.
  PeerHandler(Cluster* cluster, DeviceInventory* inventory, ClusterTensors* tensors,
              ClusterMeshes* meshes, ClusterOps* ops, CallGate* gate);
  ~PeerHandler() override;

  // Collectives another daemon drives (Prepare with a CollectiveOp).
  // REQUIRES: set before serving.
  void set_collectives(ClusterCollectives* collectives) { collectives_ = collectives; }

  grpc::ServerUnaryReactor* GetLocalDevices(
      grpc::CallbackServerContext* context, const placement::v1::GetLocalDevicesRequest* request,
      placement::v1::GetLocalDevicesResponse* response) override;
  grpc::ServerUnaryReactor* InstallMesh(grpc::CallbackServerContext* context,
                                        const placement::v1::InstallMeshRequest* request,
                                        placement::v1::InstallMeshResponse* response) override;
  grpc::ServerUnaryReactor* RemoveMesh(grpc::CallbackServerContext* context,
                                       const placement::v1::RemoveMeshRequest* request,
                                       placement::v1::RemoveMeshResponse* response) override;
  grpc::ServerReadReactor<placement::v1::WriteShardsRequest>* WriteShards(
      grpc::CallbackServerContext* context, placement::v1::WriteShardsResponse* response) override;
  grpc::ServerWriteReactor<placement::v1::ReadBoxResponse>* ReadBox(
      grpc::CallbackServerContext* context, const placement::v1::ReadBoxRequest* request) override;
  grpc::ServerUnaryReactor* Prepare(grpc::CallbackServerContext* context,
                                    const placement::v1::PrepareRequest* request,
                                    placement::v1::PrepareResponse* response) override;
  grpc::ServerUnaryReactor* Commit(grpc::CallbackServerContext* context,
                                   const placement::v1::CommitRequest* request,
                                   placement::v1::CommitResponse* response) override;
  grpc::ServerUnaryReactor* Abort(grpc::CallbackServerContext* context,
                                  const placement::v1::AbortRequest* request,
                                  placement::v1::AbortResponse* response) override;
  grpc::ServerUnaryReactor* DeleteTensors(
      grpc::CallbackServerContext* context, const placement::v1::PeerDeleteTensorsRequest* request,
      placement::v1::PeerDeleteTensorsResponse* response) override;
  grpc::ServerUnaryReactor* ListTensorRecords(
      grpc::CallbackServerContext* context, const placement::v1::ListTensorRecordsRequest* request,
      placement::v1::ListTensorRecordsResponse* response) override;

 private:
  // Waits (bounded by the cluster's op timeout) while any of `ids` is a
  // result of a multi-controller call this daemon has numbered but not
  // committed: a peer that uses it right after its own call returned finds
  // it (ClusterCollectives::AwaitSettled).
  void AwaitSettled(const std::vector<std::string>& ids) const;
  // Whether every one of `ids` is settled now (no wait).
  bool Settled(const std::vector<std::string>& ids) const;

  Cluster* cluster_;
  DeviceInventory* inventory_;
  ClusterTensors* tensors_;
  ClusterMeshes* meshes_;
  ClusterOps* ops_;
  CallGate* gate_;
  ClusterCollectives* collectives_ = nullptr;
  // Runs Prepare (which may stream for a long time), and DeleteTensors' and
  // ReadBox's waits for a call still committing here, off the callback
  // threads; more than this many at once queue.
  std::unique_ptr<WorkerPool> prepare_pool_ = std::make_unique<WorkerPool>(16);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_PEER_HANDLER_H_
