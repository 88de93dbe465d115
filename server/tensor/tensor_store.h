// TensorStore: ids, ownership, listing and memory accounting of the tensors
// the daemon holds. Allocation goes through the DeviceBackend (per-device
// budgets) and an optional per-owner quota.
//
// Lifetime: committed tensors are handed out as shared_ptr<const Tensor>;
// Delete removes a tensor from the store at once, and its device memory is
// freed as soon as no running operation holds it (immediately when idle).
//
// Device memory is allocated for the tensor's tenant (DeviceBackend
// "Memory owners": a freed block is reused only for the same tenant), so a
// block a tenant's trainer wrote in place never holds another's bytes.
//
// Ids are "t-" followed by 32 random hex digits. The store keeps committed
// tensors only; tensors being written (uploads, reshards) are owned by the
// operation until Commit, and destroying them frees their memory.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_STORE_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_STORE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/device/device_backend.h"
#include "server/tensor/owner_quota.h"
#include "server/tensor/tenant_quota.h"
#include "server/tensor/tensor.h"

namespace placement::server {

struct TensorStoreOptions {
  int64_t max_bytes_per_owner = 0;  // 0 = unlimited
  // Per tenant (tenant_quota.h): page-rounded device bytes and tensor count;
  // 0 = unlimited.
  int64_t max_device_bytes_per_tenant = 0;
  int64_t max_tensors_per_tenant = 0;
};

// In a cluster (docs/cluster.md) every daemon holds the record of every
// tensor; the buffers of a shard live only on the daemon of its device.
// `on_commit` and `on_delete` let the cluster layer tell the other daemons
// (server/cluster/cluster_tensors.h). Both run synchronously on the thread
// that commits or deletes, after the store's own change.
struct TensorStoreHooks {
  // Whether a device belongs to another daemon: Allocate leaves its shards
  // without a buffer. Null: every device is this daemon's.
  std::function<bool(int64_t device_id)> is_remote;
  // The daemon of a device (for Shard::process_index). Null: process 0.
  std::function<int32_t(int64_t device_id)> process_of;
  // After Commit made a tensor visible here.
  std::function<void(const Tensor&)> on_commit;
  // After Delete (and TakeForDonation) removed tensors here; not after
  // DeleteHere, DeleteIf or DeleteUsingMesh (each daemon deletes a mesh's
  // tensors itself).
  std::function<void(const std::vector<std::string>& ids)> on_delete;
};

struct TensorFilter {
  std::string name_prefix;  // empty = any
  std::string mesh_id;      // empty = any
};

class TensorStore {
 public:
  // REQUIRES: backend outlives the store.
  TensorStore(DeviceBackend* backend, TensorStoreOptions options);
  ~TensorStore();

  DeviceBackend* backend() const { return backend_; }
  // Whether `device_id` belongs to another daemon of the cluster.
  bool IsRemote(int64_t device_id) const { return hooks_.is_remote && hooks_.is_remote(device_id); }

  // Allocates one buffer per device shard of `sharding` over `shape`
  // (uninitialised bytes). The result is not yet visible to Get/List.
  // INVALID_ARGUMENT: shape/sharding mismatch (ValidateFor's message).
  // RESOURCE_EXHAUSTED: a device budget, the owner's quota or the tenant's
  // (bytes or tensor count); nothing is kept. NOT_FOUND: a mesh device the backend does not have.
  absl::StatusOr<std::unique_ptr<Tensor>> Allocate(DType dtype, Shape shape, NamedSharding sharding,
                                                   std::string mesh_id, std::string name,
                                                   TensorOwner owner);
  // Allocate with the shard domains already worked out (a cached collective
  // plan's, an assembler's). REQUIRES: domains ==
  // sharding.IndexDomains(shape), which the caller got without error.
  absl::StatusOr<std::unique_ptr<Tensor>> AllocateOver(DType dtype, Shape shape,
                                                       NamedSharding sharding,
                                                       std::vector<ShardDomain> domains,
                                                       std::string mesh_id, std::string name,
                                                       TensorOwner owner);

  // REQUIRES: called before the store is shared.
  void set_hooks(TensorStoreHooks hooks) { hooks_ = std::move(hooks); }

  // The memory owner tag of `tenant`'s tensors (DeviceBuffer::owner): 1, 2,
  // ... in order of first use, never kDaemonMemory.
  MemoryOwnerTag MemoryOwnerOf(const std::string& tenant);
  // `tenant`'s tag if it ever had one, else nullopt (assigns none).
  std::optional<MemoryOwnerTag> FindMemoryOwner(const std::string& tenant) const;

  // While one exists on a thread, this store's on_commit / on_delete hooks
  // do not run for that thread's calls: a daemon doing its part of an
  // operation another daemon drives (that daemon tells everyone).
  class QuietScope {
   public:
    QuietScope();
    ~QuietScope();
    QuietScope(const QuietScope&) = delete;
    QuietScope& operator=(const QuietScope&) = delete;
  };

  // Makes a fully written tensor visible under a fresh unguessable id, then
  // runs on_commit.
  std::shared_ptr<const Tensor> Commit(std::unique_ptr<Tensor> tensor);
  // Makes `tensor` visible under its own id without telling anyone (a
  // record another daemon committed). An id already present is kept as it
  // is (OK). INVALID_ARGUMENT for an empty id.
  absl::StatusOr<std::shared_ptr<const Tensor>> Install(std::unique_ptr<Tensor> tensor);
  // A fresh unguessable id ("t-" + 32 hex digits) for a tensor the cluster
  // layer is about to build on several daemons.
  std::string NewId();

  // NOT_FOUND: "tensor 't-…' does not exist".
  absl::StatusOr<std::shared_ptr<const Tensor>> Get(const std::string& id) const;
  // Removes from `ids` every id no committed tensor has; how many of `ids`
  // are committed tensors. One lock for all the ids.
  void RetainExisting(absl::flat_hash_set<std::string>* ids) const;
  int64_t CountExisting(const absl::flat_hash_set<std::string>& ids) const;
  // Get for every id, in order; NOT_FOUND names the first unknown id.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> GetMany(
      const std::vector<std::string>& ids) const;

  // Removes every id or none: NOT_FOUND names the first unknown id. Returns
  // the device bytes released.
  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& ids);
  // Removes whichever of `ids` exist (tensors deleted or donated meanwhile
  // are simply gone) and runs on_delete once for them. Returns their ids.
  std::vector<std::string> DeleteExisting(const std::vector<std::string>& ids);
  // Removes whichever of `ids` exist, without on_delete (another daemon
  // deleted them). Returns the device bytes released here.
  int64_t DeleteHere(const std::vector<std::string>& ids);
  // Removes, without on_delete, every tensor for which `pred` holds (a
  // membership change); returns the ids.
  std::vector<std::string> DeleteIf(const std::function<bool(const Tensor&)>& pred);

  // Removes `id` from the store and hands its exclusive ownership to the
  // caller (in-place collectives, donation); on_delete runs for it (its
  // record leaves the other daemons). NOT_FOUND for unknown ids;
  // FAILED_PRECONDITION while another operation still holds it.
  absl::StatusOr<std::unique_ptr<Tensor>> TakeForDonation(const std::string& id);
  // TakeForDonation for every id, all or nothing: on error no tensor leaves
  // the store. INVALID_ARGUMENT for a repeated id.
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> TakeAllForDonation(
      const std::vector<std::string>& ids);

  // Sorted by name, then id.
  std::vector<std::shared_ptr<const Tensor>> List(const TensorFilter& filter = {}) const;
  // The id and tenant of every tensor named exactly `name`, sorted by id.
  // Takes no reference to the tensors (so it never makes a concurrent
  // TakeForDonation fail).
  struct NamedId {
    std::string id;
    std::string tenant;
  };
  std::vector<NamedId> IdsNamed(const std::string& name) const;
  int64_t size() const;
  // Device bytes of every committed tensor, computed under the store's lock
  // without taking references (so it never blocks TakeForDonation).
  int64_t TotalDeviceBytes() const;
  int64_t CountUsingMesh(const std::string& mesh_id) const;
  // Deletes every tensor on `mesh_id`; returns how many.
  int64_t DeleteUsingMesh(const std::string& mesh_id);
  // Device bytes held by `owner`'s tensors (committed and allocated); `owner`
  // is a TensorOwner::QuotaKey().
  int64_t OwnerBytes(const std::string& owner) const;
  // What `tenant`'s tensors (committed and allocated) hold.
  TenantUsage TenantUsageOf(const std::string& tenant) const;
  // What every tenant holding tensors holds (TenantQuota::Usages).
  std::vector<std::pair<std::string, TenantUsage>> TenantUsages() const;
  // What `tenant`'s committed tensors hold on each of this daemon's devices
  // (device id -> bytes in use and charged, DeviceBackend::ChargeFor): the
  // figures a tenant is shown instead of the daemon's.
  struct DeviceUse {
    int64_t in_use = 0;
    int64_t charged = 0;
  };
  absl::flat_hash_map<int64_t, DeviceUse> TenantDeviceUse(const std::string& tenant) const;

 private:
  DeviceBackend* backend_;
  TensorStoreOptions options_;
  TensorStoreHooks hooks_;
  std::shared_ptr<OwnerQuota> quota_;
  std::shared_ptr<TenantQuota> tenant_quota_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Tensor>> tensors_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  // Moves whichever of `ids` exist into `released` (freed by the caller,
  // after unlocking) and their ids into `removed` when not null; returns
  // their device bytes.
  int64_t RemoveLocked(const std::vector<std::string>& ids,
                       std::vector<std::shared_ptr<Tensor>>* released,
                       std::vector<std::string>* removed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "t-" + 32 random hex digits that no tensor here has.
  std::string UnusedIdLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  mutable absl::Mutex memory_owners_mu_;
  absl::flat_hash_map<std::string, MemoryOwnerTag> memory_owners_
      ABSL_GUARDED_BY(memory_owners_mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_STORE_H_
