// ClusterMeshes: meshes that every daemon of a cluster shares (same id, same
// device order everywhere), registered by the coordinator and pushed to
// every daemon (docs/cluster.md).
//
//   - On every daemon, Attach routes MeshRegistry::Create through the
//     coordinator (ClusterService.CreateMesh) and TensorOps::DeleteMesh
//     through ClusterService.DeleteMesh; the call returns once every live
//     daemon has the change.
//   - On the coordinator it is the MeshAuthority: it registers the mesh in
//     its own registry and pushes it (PeerService.InstallMesh / RemoveMesh)
//     to the other live daemons.
//   - A daemon that joins again replaces its meshes with the coordinator's
//     (Sync), deleting the tensors of meshes that are gone.
//   - A restarted coordinator (a new coordinator_instance_id) starts with no
//     meshes: every survivor registers its own with it again (Restore), so
//     the survivors' meshes and the tensors on them stay.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_MESHES_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_MESHES_H_

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/cluster/cluster.h"
#include "server/cluster/mesh_authority.h"
#include "server/cluster/peer_transport.h"
#include "server/mesh/mesh_registry.h"
#include "server/tensor/tensor_ops.h"

namespace placement::server {

class ClusterMeshes final : public MeshAuthority {
 public:
  // REQUIRES: every argument outlives this object.
  ClusterMeshes(Cluster* cluster, MeshRegistry* registry, TensorOps* ops, PeerTransport* peers)
      : cluster_(cluster), registry_(registry), ops_(ops), peers_(peers) {}
  // Stops a restore in progress.
  ~ClusterMeshes() override;

  // Routes this daemon's mesh changes through the coordinator and listens
  // to membership (Sync after a rejoin). REQUIRES: before serving.
  void Attach();

  // MeshAuthority (the coordinator).
  absl::StatusOr<RegisteredMesh> CreateMesh(const std::string& tenant, const std::string& mesh_id,
                                            std::vector<MeshAxis> axes,
                                            std::vector<int64_t> device_ids) override;
  absl::StatusOr<int64_t> DeleteMesh(const std::string& mesh_id, const std::string& tenant,
                                     bool admin, bool force) override;
  std::vector<RegisteredMesh> ListMeshes() const override;

  // PeerService.InstallMesh / RemoveMesh on this daemon.
  void InstallHere(RegisteredMesh mesh);
  absl::StatusOr<int64_t> RemoveHere(const std::string& mesh_id, bool force);

  // Makes this daemon's meshes the coordinator's.
  absl::Status Sync();
  // Registers this daemon's meshes with a restarted coordinator (one it
  // already has, from another survivor, is left as it is). The restarted
  // coordinator checks a mesh's devices against its own view, which can
  // lag its members' by a heartbeat ("device 0 is not in the cluster"), so
  // the listener has it done by RestoreUntilDone on a thread of its own.
  absl::Status Restore();

 private:
  Cluster* cluster_;
  MeshRegistry* registry_;
  TensorOps* ops_;
  PeerTransport* peers_;
  // Starts RestoreUntilDone unless it runs.
  void RestoreSoon();
  // Restore every 200 ms until it succeeds, the object goes, or a minute
  // passed (logged).
  void RestoreUntilDone();

  absl::Mutex restore_mu_;
  bool restoring_ ABSL_GUARDED_BY(restore_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(restore_mu_) = false;
  std::thread restorer_ ABSL_GUARDED_BY(restore_mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_MESHES_H_
