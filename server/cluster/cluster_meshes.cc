#include "server/cluster/cluster_meshes.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/cluster/fan_out.h"
#include "server/logging.h"

namespace placement::server {

void ClusterMeshes::Attach() {
  Cluster* cluster = cluster_;
  registry_->set_publisher([cluster](const RegisteredMesh& resolved) {
    return cluster->coordinator()->CreateMesh(resolved.tenant, resolved.id, resolved.mesh.axes(),
                                              resolved.mesh.device_ids());
  });
  ops_->set_mesh_remover([cluster](const std::string& mesh_id, bool force) {
    return cluster->coordinator()->DeleteMesh(mesh_id, "", /*admin=*/true, force);
  });
  cluster_->AddListener([this](const ClusterEvent& event) {
    const int32_t self = cluster_->process_index();
    const bool was_out = event.before->state == ClusterState::kFailed ||
                         (self < static_cast<int32_t>(event.before->processes.size()) &&
                          event.before->processes[self].state == ProcessState::kLost);
    const bool new_coordinator =
        !event.before->coordinator_instance_id.empty() &&
        event.before->coordinator_instance_id != event.after->coordinator_instance_id;
    if (new_coordinator && event.after->IsAlive(self)) {
      RestoreSoon();
    } else if (was_out && event.after->IsAlive(self)) {
      absl::Status synced = Sync();
      if (!synced.ok()) LogWarning("cluster: could not copy the meshes: ", synced.message());
    }
  });
}

absl::StatusOr<RegisteredMesh> ClusterMeshes::CreateMesh(const std::string& tenant,
                                                         const std::string& mesh_id,
                                                         std::vector<MeshAxis> axes,
                                                         std::vector<int64_t> device_ids) {
  ASSIGN_OR_RETURN(Mesh mesh, Mesh::Create(std::move(axes), std::move(device_ids)));
  for (int64_t id : mesh.device_ids()) {
    if (cluster_->ProcessOf(id) < 0) {
      return absl::InvalidArgumentError(absl::StrCat("device ", id, " is not in the cluster"));
    }
  }
  ASSIGN_OR_RETURN(RegisteredMesh registered,
                   registry_->Register(RegisteredMesh{mesh_id, std::move(mesh), tenant}));
  absl::Status pushed =
      FanOutCall(peers_, cluster_->AlivePeers(), &PeerTransport::StartInstallMesh)(registered);
  if (!pushed.ok()) {
    // A daemon that missed it is failing; it copies the meshes when it
    // joins again.
    LogWarning("cluster: mesh '", registered.id,
               "' did not reach every daemon: ", pushed.message());
  }
  return registered;
}

absl::StatusOr<int64_t> ClusterMeshes::DeleteMesh(const std::string& mesh_id,
                                                  const std::string& /*tenant*/, bool /*admin*/,
                                                  bool force) {
  // The calling daemon checked visibility and use; every daemon holds the
  // same records, so its count is everyone's.
  RETURN_IF_ERROR(registry_->Get(mesh_id).status());
  absl::Status pushed =
      FanOutCall(peers_, cluster_->AlivePeers(), &PeerTransport::StartRemoveMesh)(mesh_id, force);
  if (!pushed.ok()) {
    LogWarning("cluster: removing mesh '", mesh_id,
               "' did not reach every daemon: ", pushed.message());
  }
  return RemoveHere(mesh_id, force);
}

std::vector<RegisteredMesh> ClusterMeshes::ListMeshes() const { return registry_->List(); }

void ClusterMeshes::InstallHere(RegisteredMesh mesh) { registry_->Install(std::move(mesh)); }

absl::StatusOr<int64_t> ClusterMeshes::RemoveHere(const std::string& mesh_id, bool force) {
  if (!registry_->Get(mesh_id).ok()) return 0;
  return ops_->DeleteMeshHere(mesh_id, force);
}

ClusterMeshes::~ClusterMeshes() {
  std::thread restorer;
  {
    absl::MutexLock lock(&restore_mu_);
    stopping_ = true;
    restorer = std::move(restorer_);
  }
  if (restorer.joinable()) restorer.join();
}

void ClusterMeshes::RestoreSoon() {
  absl::MutexLock lock(&restore_mu_);
  if (restoring_ || stopping_) return;
  restoring_ = true;
  // A previous restorer has set restoring_ = false and is returning.
  if (restorer_.joinable()) restorer_.join();
  restorer_ = std::thread([this] { RestoreUntilDone(); });
}

void ClusterMeshes::RestoreUntilDone() {
  const absl::Time give_up = absl::Now() + absl::Minutes(1);
  for (;;) {
    const absl::Status restored = Restore();
    absl::MutexLock lock(&restore_mu_);
    if (!restored.ok() && !stopping_ && absl::Now() < give_up) {
      restore_mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::Milliseconds(200));
      if (!stopping_) continue;
    }
    if (!restored.ok()) {
      LogWarning("cluster: could not register the meshes with the restarted coordinator: ",
                 restored.message());
    }
    restoring_ = false;
    return;
  }
}

absl::Status ClusterMeshes::Restore() {
  if (cluster_->process_index() == 0) return absl::OkStatus();  // the new coordinator
  for (const RegisteredMesh& mesh : registry_->List()) {
    absl::StatusOr<RegisteredMesh> made = cluster_->coordinator()->CreateMesh(
        mesh.tenant, mesh.id, mesh.mesh.axes(), mesh.mesh.device_ids());
    if (!made.ok() && made.status().code() != absl::StatusCode::kAlreadyExists) {
      return made.status();
    }
  }
  return absl::OkStatus();
}

absl::Status ClusterMeshes::Sync() {
  ASSIGN_OR_RETURN(std::vector<RegisteredMesh> meshes, cluster_->coordinator()->ListMeshes());
  std::set<std::string> keep;
  for (RegisteredMesh& mesh : meshes) {
    keep.insert(mesh.id);
    registry_->Install(std::move(mesh));
  }
  for (const RegisteredMesh& mesh : registry_->List()) {
    if (!keep.contains(mesh.id)) ops_->DeleteMeshHere(mesh.id, /*force=*/true).IgnoreError();
  }
  return absl::OkStatus();
}

}  // namespace placement::server
