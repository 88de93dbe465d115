#include "server/tensor/tensor_ops.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/tensor/assembler.h"
#include "server/tensor/resharder.h"

namespace placement::server {
namespace {

absl::Status Prefixed(absl::string_view what, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat(what, ": ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<UploadSession>> TensorOps::StartUpload(
    TensorSpec spec, const PlacementRule& rule) const {
  RETURN_IF_ERROR(ValidateShape(spec.shape, spec.dtype));
  ASSIGN_OR_RETURN(ResolvedSharding target, resolver_.Resolve(rule, spec.shape));
  return UploadSession::Start(store_, std::move(spec), std::move(target), remote_);
}

absl::StatusOr<std::unique_ptr<BatchUploadSession>> TensorOps::StartBatchUpload(
    const std::vector<BatchArraySpec>& arrays, const PlacementRule& rule, const std::string& name,
    const TensorOwner& owner) const {
  std::vector<BatchArray> resolved;
  resolved.reserve(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    const BatchArraySpec& array = arrays[i];
    const std::string what = absl::StrCat("arrays[", i, "] '", array.key, "'");
    if (absl::Status s = ValidateShape(array.shape, array.dtype); !s.ok()) return Prefixed(what, s);
    absl::StatusOr<ResolvedSharding> target =
        resolver_.Resolve(rule, array.shape, RuleScope::kGroupMember);
    if (!target.ok()) return Prefixed(what, target.status());
    TensorSpec spec{array.dtype, array.shape,
                    name.empty() ? std::string() : absl::StrCat(name, "/", array.key), owner};
    resolved.push_back(BatchArray{array.key, std::move(spec), std::move(*target)});
  }
  return BatchUploadSession::Start(remote_, store_, std::move(resolved));
}

absl::StatusOr<std::unique_ptr<DownloadPlan>> TensorOps::OpenDownload(
    const std::string& id, const DownloadSelection& selection) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store_->Get(id));
  return DownloadPlan::Create(std::move(tensor), selection, store_->backend(), remote_);
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> TensorOps::Place(
    const std::vector<std::string>& ids, const PlacementRule& rule, SourceHandling source,
    const std::string& name) const {
  if (ids.empty()) {
    return absl::InvalidArgumentError("tensor_ids is empty; name the tensors to place");
  }
  if (!name.empty() && ids.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("name '", name,
                                                   "' renames a single result, but ", ids.size(),
                                                   " tensors are being placed"));
  }
  if (source == SourceHandling::kDonate) {
    absl::flat_hash_set<std::string> seen;
    for (const std::string& id : ids) {
      if (!seen.insert(id).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor_ids lists '", id, "' twice; a tensor can be donated once"));
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const Tensor>> sources, store_->GetMany(ids));
  std::vector<std::unique_ptr<Tensor>> results;
  results.reserve(sources.size());
  // Results built across daemons are committed as they are made; on a
  // later failure they are deleted again (everywhere).
  std::vector<std::shared_ptr<const Tensor>> spread(sources.size());
  auto undo = [&] {
    for (const auto& t : spread) {
      if (t != nullptr) store_->Delete({t->id}).IgnoreError();
    }
  };
  for (size_t i = 0; i < sources.size(); ++i) {
    const std::shared_ptr<const Tensor>& src = sources[i];
    const std::string what =
        absl::StrCat("tensor '", src->id, "' (", TypedShapeToString(src->dtype, src->shape), ")");
    absl::StatusOr<ResolvedSharding> target =
        resolver_.Resolve(rule, src->shape, RuleScope::kGroupMember);
    if (!target.ok()) {
      undo();
      return Prefixed(what, target.status());
    }
    const std::string result_name = name.empty() ? src->name : name;
    if (distributed_ != nullptr && (!src->all_local() || SpansDaemons(target->sharding))) {
      absl::StatusOr<std::shared_ptr<const Tensor>> placed =
          distributed_->Place(*src, *target, result_name, src->owner);
      if (!placed.ok()) {
        undo();
        return Prefixed(what, placed.status());
      }
      spread[i] = *std::move(placed);
      results.push_back(nullptr);
      continue;
    }
    absl::StatusOr<std::unique_ptr<Tensor>> placed =
        Reshard(store_, *src, *target, result_name, src->owner, remote_);
    if (!placed.ok()) {
      undo();
      return Prefixed(what, placed.status());  // `results` are freed
    }
    results.push_back(std::move(*placed));
  }
  std::vector<std::shared_ptr<const Tensor>> out;
  out.reserve(results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    out.push_back(results[i] != nullptr ? store_->Commit(std::move(results[i])) : spread[i]);
  }
  if (source == SourceHandling::kDonate) {
    // A source deleted concurrently is already gone, which is what donation wants.
    for (const std::string& id : ids) store_->Delete({id}).IgnoreError();
  }
  return out;
}

bool TensorOps::SpansDaemons(const NamedSharding& sharding) const {
  for (int64_t device : sharding.mesh().device_ids()) {
    if (store_->IsRemote(device)) return true;
  }
  return false;
}

absl::StatusOr<std::shared_ptr<const Tensor>> TensorOps::Assemble(
    Shape global_shape, const TensorPlacement& placement, const std::vector<std::string>& ids,
    SourceHandling source, std::string name) const {
  ASSIGN_OR_RETURN(ResolvedSharding target, resolver_.ResolvePlacement(placement, global_shape));
  if (distributed_ != nullptr && SpansDaemons(target.sharding)) {
    return distributed_->Assemble(std::move(global_shape), target, ids, source, std::move(name));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> tensor,
      AssembleTensor(store_, std::move(global_shape), target, ids, source, std::move(name)));
  return store_->Commit(std::move(tensor));
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> TensorOps::Disassemble(
    const std::string& id, SourceHandling source) const {
  if (distributed_ != nullptr) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store_->Get(id));
    if (!tensor->all_local()) return distributed_->Disassemble(id, source);
  }
  ASSIGN_OR_RETURN(std::vector<std::unique_ptr<Tensor>> pieces,
                   DisassembleTensor(store_, id, source));
  std::vector<std::shared_ptr<const Tensor>> out;
  out.reserve(pieces.size());
  for (std::unique_ptr<Tensor>& piece : pieces) out.push_back(store_->Commit(std::move(piece)));
  return out;
}

absl::StatusOr<int64_t> TensorOps::DeleteMesh(const std::string& mesh_id, bool force) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(mesh_id));
  const int64_t users = store_->CountUsingMesh(mesh_id);
  if (users > 0 && !force) {
    return absl::FailedPreconditionError(absl::StrCat(
        "mesh '", mesh_id, "' is used by ", users,
        " tensor(s); delete them first, or delete the mesh with force to delete them too"));
  }
  if (mesh_remover_) return mesh_remover_(mesh_id, force);
  RETURN_IF_ERROR(meshes_->Delete(mesh_id));
  return force ? store_->DeleteUsingMesh(mesh_id) : 0;
}

absl::StatusOr<int64_t> TensorOps::DeleteMeshHere(const std::string& mesh_id, bool force) const {
  ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(mesh_id));
  const int64_t users = store_->CountUsingMesh(mesh_id);
  if (users > 0 && !force) {
    return absl::FailedPreconditionError(
        absl::StrCat("mesh '", mesh_id, "' is used by ", users, " tensor(s)"));
  }
  RETURN_IF_ERROR(meshes_->Delete(mesh_id));
  return force ? store_->DeleteUsingMesh(mesh_id) : 0;
}

}  // namespace placement::server
