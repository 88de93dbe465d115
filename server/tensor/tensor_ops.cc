#include "server/tensor/tensor_ops.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/process_local.h"
#include "common/status_macros.h"
#include "server/tensor/assembler.h"
#include "server/tensor/derived_name.h"
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

namespace {

// The size of the mesh a rule names (1 for single devices): dimensions of
// this size suit any of its shardings.
int64_t MeshSizeOf(const PlacementRule& rule, const MeshRegistry& meshes) {
  const std::string& mesh_id = MeshIdOf(rule);
  if (mesh_id.empty()) return 1;
  absl::StatusOr<RegisteredMesh> mesh = meshes.Get(mesh_id);
  return mesh.ok() ? mesh->mesh.num_devices() : 1;
}

}  // namespace

absl::StatusOr<std::unique_ptr<UploadSession>> TensorOps::StartProcessLocalUpload(
    TensorSpec spec, const PlacementRule& rule, std::optional<Shape> global_shape,
    const ProcessLocalRequest& request, RuleScope scope) const {
  RETURN_IF_ERROR(ValidateShape(spec.shape, spec.dtype));
  if (remote_ == nullptr) {
    if (global_shape.has_value() && *global_shape != spec.shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          "this daemon is a single process, so process_local.global_shape must be empty or the "
          "local shape: got global_shape=",
          ShapeToString(*global_shape), " and a local shape of ", ShapeToString(spec.shape)));
    }
    return StartUpload(std::move(spec), rule);
  }
  const int32_t self = remote_->process_index();
  RemoteShards* remote = remote_;
  auto process_of = [remote](int64_t device) { return remote->ProcessOf(device); };
  Shape global;
  if (const auto* partition = std::get_if<DataPartitionRule>(&rule)) {
    // loadax: every process's leaf is its share of dimension 0.
    ASSIGN_OR_RETURN(RegisteredMesh mesh, meshes_->Get(partition->mesh_id));
    std::vector<int32_t> processes;
    int64_t local_devices = 0;
    for (int64_t device : mesh.mesh.device_ids()) {
      const int32_t p = remote_->ProcessOf(device);
      if (std::find(processes.begin(), processes.end(), p) == processes.end()) {
        processes.push_back(p);
      }
      local_devices += p == self ? 1 : 0;
    }
    if (local_devices == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("mesh '", mesh.id, "' has no device on this daemon (process ", self,
                       "); upload each process's part to its own daemon"));
    }
    ASSIGN_OR_RETURN(global, LoadaxGlobalShape(partition->partition == DataPartition::kFull
                                                   ? ProcessDataPartition::kFull
                                                   : ProcessDataPartition::kReplicated,
                                               spec.shape, static_cast<int64_t>(processes.size()),
                                               local_devices));
    if (global_shape.has_value() && *global_shape != global) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process_local.global_shape ", ShapeToString(*global_shape), " disagrees with the ",
          ShapeToString(global), " the data_partition rule gives"));
    }
  } else {
    // The sharding first, against a stand-in shape every axis product
    // divides (JAX resolves process layouts over (num_devices,) * rank).
    const Shape stand_in(spec.shape.size(), MeshSizeOf(rule, *meshes_));
    ASSIGN_OR_RETURN(ResolvedSharding first, resolver_.Resolve(rule, stand_in, scope));
    if (global_shape.has_value()) {
      global = *global_shape;
    } else {
      ASSIGN_OR_RETURN(global, InferGlobalShape(first.sharding, spec.shape, process_of, self));
    }
  }
  ASSIGN_OR_RETURN(ResolvedSharding target, resolver_.Resolve(rule, global, scope));
  ASSIGN_OR_RETURN(LocalDataLayout layout,
                   ProcessLocalLayout(target.sharding, global, spec.shape, process_of, self));
  if (spec.name.empty()) spec.name = request.global_name;
  spec.shape = global;
  return UploadSession::StartProcessLocal(store_, std::move(spec), std::move(target), layout,
                                          remote_, request);
}

absl::StatusOr<std::unique_ptr<BatchUploadSession>> TensorOps::StartProcessLocalBatch(
    const std::vector<BatchArraySpec>& arrays, const PlacementRule& rule, const std::string& name,
    const TensorOwner& owner, const ProcessLocalRequest& request) const {
  std::vector<std::string> keys;
  std::vector<std::unique_ptr<UploadSession>> sessions;
  absl::flat_hash_set<std::string> seen;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const BatchArraySpec& array = arrays[i];
    const std::string what = absl::StrCat("arrays[", i, "] '", array.key, "'");
    if (array.key.empty() || !seen.insert(array.key).second) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": keys must be non-empty and unique"));
    }
    ProcessLocalRequest one = request;
    one.global_name = absl::StrCat(request.global_name, "/", array.key);
    TensorSpec spec{array.dtype, array.shape,
                    absl::StrCat(name.empty() ? request.global_name : name, "/", array.key), owner};
    absl::StatusOr<std::unique_ptr<UploadSession>> session =
        StartProcessLocalUpload(std::move(spec), rule, std::nullopt, one, RuleScope::kGroupMember);
    if (!session.ok()) {
      for (auto& started : sessions) started->Abort();
      return Prefixed(what, session.status());
    }
    keys.push_back(array.key);
    sessions.push_back(*std::move(session));
  }
  return BatchUploadSession::FromSessions(std::move(keys), std::move(sessions));
}

// Tensors are named "<name>/<key>" when `name` is set.
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
    const std::string result_name =
        DerivedTensorName(name, src->name, "place", source == SourceHandling::kDonate);
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
    bool all_local = true;
    {
      // Released before the call: a donating participant (this daemon
      // included) takes the source only when nothing else holds it.
      ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> tensor, store_->Get(id));
      all_local = tensor->all_local();
    }
    if (!all_local) return distributed_->Disassemble(id, source);
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
