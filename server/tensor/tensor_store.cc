#include "server/tensor/tensor_store.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

thread_local int quiet_depth = 0;

int64_t ShardBytes(DType dtype, const ShardDomain& domain) {
  return DTypeSize(dtype) * BoxNumElements(domain.box);
}

absl::Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("tensor '", id, "' does not exist"));
}

}  // namespace

TensorStore::QuietScope::QuietScope() { ++quiet_depth; }
TensorStore::QuietScope::~QuietScope() { --quiet_depth; }

TensorStore::TensorStore(DeviceBackend* backend, TensorStoreOptions options)
    : backend_(backend),
      options_(options),
      quota_(OwnerQuota::Create(options.max_bytes_per_owner)),
      tenant_quota_(TenantQuota::Create(options.max_device_bytes_per_tenant,
                                        options.max_tensors_per_tenant)) {}

TensorStore::~TensorStore() = default;

absl::StatusOr<std::unique_ptr<Tensor>> TensorStore::Allocate(DType dtype, Shape shape,
                                                              NamedSharding sharding,
                                                              std::string mesh_id, std::string name,
                                                              TensorOwner owner) {
  RETURN_IF_ERROR(ValidateShape(shape, dtype));
  ASSIGN_OR_RETURN(std::vector<ShardDomain> domains, sharding.IndexDomains(shape));
  return AllocateOver(dtype, std::move(shape), std::move(sharding), std::move(domains),
                      std::move(mesh_id), std::move(name), std::move(owner));
}

absl::StatusOr<std::unique_ptr<Tensor>> TensorStore::AllocateOver(
    DType dtype, Shape shape, NamedSharding sharding, std::vector<ShardDomain> domains,
    std::string mesh_id, std::string name, TensorOwner owner) {
  // Only this daemon's shards are allocated (and charged) here.
  auto remote = [this](int64_t device) { return hooks_.is_remote && hooks_.is_remote(device); };
  int64_t total = 0;
  int64_t page_rounded = 0;
  for (const ShardDomain& domain : domains) {
    if (remote(domain.device_id)) continue;
    total += ShardBytes(dtype, domain);
    page_rounded += PageRoundedBytes(ShardBytes(dtype, domain));
  }

  auto tensor = std::make_unique<Tensor>();
  ASSIGN_OR_RETURN(std::shared_ptr<void> tenant_charge,
                   tenant_quota_->Charge(owner.tenant, page_rounded));
  ASSIGN_OR_RETURN(std::shared_ptr<void> owner_charge, quota_->Charge(owner.QuotaKey(), total));
  tensor->quota_charge = std::make_shared<std::pair<std::shared_ptr<void>, std::shared_ptr<void>>>(
      std::move(tenant_charge), std::move(owner_charge));
  tensor->shards.reserve(domains.size());
  const MemoryOwnerTag memory_owner = MemoryOwnerOf(owner.tenant);
  for (ShardDomain& domain : domains) {
    const int32_t process = hooks_.process_of ? hooks_.process_of(domain.device_id) : 0;
    if (remote(domain.device_id)) {
      tensor->shards.push_back(Shard{std::move(domain), nullptr, process});
      continue;
    }
    const int64_t bytes = ShardBytes(dtype, domain);
    absl::StatusOr<std::unique_ptr<DeviceBuffer>> buffer =
        backend_->AllocateFor(domain.device_id, bytes, memory_owner);
    if (!buffer.ok()) {
      // Everything allocated so far is freed with `tensor`.
      return absl::Status(
          buffer.status().code(),
          absl::StrCat("cannot place ", TypedShapeToString(dtype, shape), " (", total,
                       " bytes over ", domains.size(), " shards): ", buffer.status().message()));
    }
    tensor->shards.push_back(Shard{std::move(domain), std::move(*buffer), process});
  }
  tensor->name = std::move(name);
  tensor->owner = std::move(owner);
  tensor->dtype = dtype;
  tensor->shape = std::move(shape);
  tensor->sharding = std::move(sharding);
  tensor->mesh_id = std::move(mesh_id);
  return tensor;
}

MemoryOwnerTag TensorStore::MemoryOwnerOf(const std::string& tenant) {
  absl::MutexLock lock(&memory_owners_mu_);
  auto [it, added] =
      memory_owners_.try_emplace(tenant, static_cast<MemoryOwnerTag>(memory_owners_.size() + 1));
  return it->second;
}

std::optional<MemoryOwnerTag> TensorStore::FindMemoryOwner(const std::string& tenant) const {
  absl::MutexLock lock(&memory_owners_mu_);
  auto it = memory_owners_.find(tenant);
  if (it == memory_owners_.end()) return std::nullopt;
  return it->second;
}

std::string TensorStore::NewId() {
  absl::MutexLock lock(&mu_);
  return UnusedIdLocked();
}

std::string TensorStore::UnusedIdLocked() {
  std::string id;
  do {
    // StrCat of Hex: a few times cheaper than StrFormat, on every result.
    id = absl::StrCat("t-", absl::Hex(absl::Uniform<uint64_t>(bitgen_), absl::kZeroPad16),
                      absl::Hex(absl::Uniform<uint64_t>(bitgen_), absl::kZeroPad16));
  } while (tensors_.contains(id));
  return id;
}

absl::StatusOr<std::shared_ptr<const Tensor>> TensorStore::Install(std::unique_ptr<Tensor> tensor) {
  if (tensor->id.empty()) return absl::InvalidArgumentError("a tensor to install needs its id");
  std::shared_ptr<Tensor> shared(std::move(tensor));
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = tensors_.emplace(shared->id, shared);
  return std::shared_ptr<const Tensor>(it->second);
}

std::shared_ptr<const Tensor> TensorStore::Commit(std::unique_ptr<Tensor> tensor) {
  std::shared_ptr<Tensor> shared(std::move(tensor));
  {
    absl::MutexLock lock(&mu_);
    shared->id = UnusedIdLocked();
    tensors_.emplace(shared->id, shared);
  }
  if (hooks_.on_commit && quiet_depth == 0) hooks_.on_commit(*shared);
  return shared;
}

absl::StatusOr<std::shared_ptr<const Tensor>> TensorStore::Get(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  auto it = tensors_.find(id);
  if (it == tensors_.end()) return NotFound(id);
  return std::shared_ptr<const Tensor>(it->second);
}

void TensorStore::RetainExisting(absl::flat_hash_set<std::string>* ids) const {
  absl::MutexLock lock(&mu_);
  for (auto it = ids->begin(); it != ids->end();) {
    if (tensors_.contains(*it)) {
      ++it;
    } else {
      ids->erase(it++);  // erasing does not move the other elements
    }
  }
}

int64_t TensorStore::CountExisting(const absl::flat_hash_set<std::string>& ids) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const std::string& id : ids) n += tensors_.contains(id);
  return n;
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> TensorStore::GetMany(
    const std::vector<std::string>& ids) const {
  std::vector<std::shared_ptr<const Tensor>> out;
  out.reserve(ids.size());
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    auto it = tensors_.find(id);
    if (it == tensors_.end()) return NotFound(id);
    out.push_back(it->second);
  }
  return out;
}

absl::StatusOr<int64_t> TensorStore::Delete(const std::vector<std::string>& ids) {
  // Released outside the lock: freeing large buffers takes time.
  std::vector<std::shared_ptr<Tensor>> released;
  int64_t freed = 0;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : ids) {
      if (!tensors_.contains(id)) return NotFound(id);
    }
    freed = RemoveLocked(ids, &released, /*removed=*/nullptr);
  }
  if (hooks_.on_delete && quiet_depth == 0) hooks_.on_delete(ids);
  return freed;
}

std::vector<std::string> TensorStore::DeleteExisting(const std::vector<std::string>& ids) {
  std::vector<std::shared_ptr<Tensor>> released;
  std::vector<std::string> removed;
  {
    absl::MutexLock lock(&mu_);
    RemoveLocked(ids, &released, &removed);
  }
  if (hooks_.on_delete && quiet_depth == 0 && !removed.empty()) hooks_.on_delete(removed);
  return removed;
}

int64_t TensorStore::DeleteHere(const std::vector<std::string>& ids) {
  std::vector<std::shared_ptr<Tensor>> released;
  absl::MutexLock lock(&mu_);
  return RemoveLocked(ids, &released, /*removed=*/nullptr);
}

int64_t TensorStore::RemoveLocked(const std::vector<std::string>& ids,
                                  std::vector<std::shared_ptr<Tensor>>* released,
                                  std::vector<std::string>* removed) {
  int64_t freed = 0;
  for (const std::string& id : ids) {
    auto it = tensors_.find(id);
    if (it == tensors_.end()) continue;  // unknown, or repeated
    freed += it->second->device_bytes();
    released->push_back(std::move(it->second));
    if (removed != nullptr) removed->push_back(id);
    tensors_.erase(it);
  }
  return freed;
}

std::vector<std::string> TensorStore::DeleteIf(const std::function<bool(const Tensor&)>& pred) {
  std::vector<std::shared_ptr<Tensor>> released;
  std::vector<std::string> ids;
  absl::MutexLock lock(&mu_);
  for (auto it = tensors_.begin(); it != tensors_.end();) {
    if (pred(*it->second)) {
      ids.push_back(it->first);
      released.push_back(std::move(it->second));
      tensors_.erase(it++);
    } else {
      ++it;
    }
  }
  return ids;
}

absl::StatusOr<std::unique_ptr<Tensor>> TensorStore::TakeForDonation(const std::string& id) {
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> taken, TakeAllForDonation({id}));
  return std::move(taken.front());
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> TensorStore::TakeAllForDonation(
    const std::vector<std::string>& ids) {
  std::vector<std::unique_ptr<Tensor>> out;
  {
    absl::MutexLock lock(&mu_);
    absl::flat_hash_set<std::string> seen;
    for (const std::string& id : ids) {
      if (!seen.insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor '", id, "' is listed twice; each tensor can be donated once"));
      }
      auto it = tensors_.find(id);
      if (it == tensors_.end()) return NotFound(id);
      // Every other reference was handed out by this store under mu_, so no
      // new one can appear while we hold it.
      const long holders = it->second.use_count() - 1;
      if (holders > 0) {
        return absl::FailedPreconditionError(
            absl::StrCat("tensor '", id, "' is in use by ", holders,
                         " running operation(s) (a download, reshard, collective or open shard "
                         "view); retry when "
                         "they finish"));
      }
    }
    out.reserve(ids.size());
    for (const std::string& id : ids) {
      auto it = tensors_.find(id);
      // Sole owner: move the contents out; the emptied shell dies with the
      // entry.
      out.push_back(std::make_unique<Tensor>(std::move(*it->second)));
      tensors_.erase(it);
    }
  }
  if (hooks_.on_delete && quiet_depth == 0) hooks_.on_delete(ids);
  return out;
}

std::vector<std::shared_ptr<const Tensor>> TensorStore::List(const TensorFilter& filter) const {
  std::vector<std::shared_ptr<const Tensor>> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, tensor] : tensors_) {
      if (!filter.mesh_id.empty() && tensor->mesh_id != filter.mesh_id) continue;
      if (!absl::StartsWith(tensor->name, filter.name_prefix)) continue;
      out.push_back(tensor);
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
    return a->name != b->name ? a->name < b->name : a->id < b->id;
  });
  return out;
}

std::vector<TensorStore::NamedId> TensorStore::IdsNamed(const std::string& name) const {
  std::vector<NamedId> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, tensor] : tensors_) {
      if (tensor->name == name) out.push_back({id, tensor->owner.tenant});
    }
  }
  std::sort(out.begin(), out.end(), [](const NamedId& a, const NamedId& b) { return a.id < b.id; });
  return out;
}

int64_t TensorStore::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(tensors_.size());
}

int64_t TensorStore::TotalDeviceBytes() const {
  absl::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [id, tensor] : tensors_) total += tensor->device_bytes();
  return total;
}

int64_t TensorStore::CountUsingMesh(const std::string& mesh_id) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, tensor] : tensors_) n += tensor->mesh_id == mesh_id ? 1 : 0;
  return n;
}

int64_t TensorStore::DeleteUsingMesh(const std::string& mesh_id) {
  std::vector<std::shared_ptr<Tensor>> released;
  absl::MutexLock lock(&mu_);
  for (auto it = tensors_.begin(); it != tensors_.end();) {
    if (it->second->mesh_id == mesh_id) {
      released.push_back(std::move(it->second));
      tensors_.erase(it++);
    } else {
      ++it;
    }
  }
  return static_cast<int64_t>(released.size());
}

int64_t TensorStore::OwnerBytes(const std::string& owner) const { return quota_->BytesOf(owner); }

TenantUsage TensorStore::TenantUsageOf(const std::string& tenant) const {
  return tenant_quota_->UsageOf(tenant);
}

std::vector<std::pair<std::string, TenantUsage>> TensorStore::TenantUsages() const {
  return tenant_quota_->Usages();
}

absl::flat_hash_map<int64_t, TensorStore::DeviceUse> TensorStore::TenantDeviceUse(
    const std::string& tenant) const {
  absl::flat_hash_map<int64_t, DeviceUse> use;
  absl::MutexLock lock(&mu_);
  for (const auto& [id, tensor] : tensors_) {
    if (tensor->owner.tenant != tenant) continue;
    for (const Shard& shard : tensor->shards) {
      if (!shard.local()) continue;
      DeviceUse& d = use[shard.domain.device_id];
      d.in_use += shard.buffer->size();
      d.charged += backend_->ChargeFor(shard.buffer->size());
    }
  }
  return use;
}

}  // namespace placement::server
