// TensorOps: the tensor service's core API -- what the gRPC handlers call.
// It resolves placement rules against the registered meshes and drives the
// store, upload sessions, download plans, resharder and assembler, so the
// handlers only translate protos:
//
//   StartUpload / StartBatchUpload   Upload, UploadBatch (rule per array,
//                                    RuleScope::kGroupMember for batches)
//   OpenDownload                     Download
//   Place                            device_put / reshard of existing tensors,
//                                    all or nothing, optional donation
//   Assemble / Disassemble           single-device pieces <-> sharded tensor
//   DeleteMesh                       refuses while tensors use the mesh
//                                    unless forced (then deletes them)
//
// Errors keep the codes of the parts (see each header). Thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_OPS_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_OPS_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/mesh/mesh_registry.h"
#include "server/tensor/batch_upload_session.h"
#include "server/tensor/distributed_ops.h"
#include "server/tensor/download_plan.h"
#include "server/tensor/placement_rule.h"
#include "server/tensor/placement_rules.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"
#include "server/tensor/upload_session.h"

namespace placement::server {

// One array of a batch header.
struct BatchArraySpec {
  std::string key;
  DType dtype = DType::kF32;
  Shape shape;
};

class TensorOps {
 public:
  // REQUIRES: store and meshes outlive this object.
  TensorOps(TensorStore* store, MeshRegistry* meshes)
      : store_(store), meshes_(meshes), resolver_(meshes) {}

  TensorStore* store() const { return store_; }
  // In a cluster: how shards on other daemons are reached (uploads,
  // downloads, reshards). REQUIRES: set before serving.
  void set_remote_shards(RemoteShards* remote) { remote_ = remote; }
  RemoteShards* remote_shards() const { return remote_; }
  // In a cluster: Place / Assemble / Disassemble whose tensors span daemons
  // go to `distributed`. REQUIRES: set before serving.
  void set_distributed(DistributedOps* distributed) { distributed_ = distributed; }

  // Whether a tensor laid out as `sharding` has devices of other daemons.
  bool SpansDaemons(const NamedSharding& sharding) const;
  MeshRegistry* meshes() const { return meshes_; }
  const PlacementResolver& resolver() const { return resolver_; }

  absl::StatusOr<std::unique_ptr<UploadSession>> StartUpload(TensorSpec spec,
                                                             const PlacementRule& rule) const;

  // A multi-controller upload of this process's part (JAX
  // make_array_from_process_local_data, loadax host_to_global_device_array):
  // spec.shape is the LOCAL shape. The sharding comes from `rule`; the
  // global shape is `global_shape` when given, else JAX's inference (loadax's
  // rule for data_partition rules). A lone daemon is one process: the
  // global shape must then be unset or the local one (JAX's single-process
  // rule) and this is an ordinary upload.
  absl::StatusOr<std::unique_ptr<UploadSession>> StartProcessLocalUpload(
      TensorSpec spec, const PlacementRule& rule, std::optional<Shape> global_shape,
      const ProcessLocalRequest& request, RuleScope scope = RuleScope::kSingleTensor) const;
  // The same for a batch (a pytree): array `key` meets the others as
  // "<global_name>/<key>" and is named "<name or global_name>/<key>".
  absl::StatusOr<std::unique_ptr<BatchUploadSession>> StartProcessLocalBatch(
      const std::vector<BatchArraySpec>& arrays, const PlacementRule& rule, const std::string& name,
      const TensorOwner& owner, const ProcessLocalRequest& request) const;

  // Tensors are named "<name>/<key>" when `name` is set.
  absl::StatusOr<std::unique_ptr<BatchUploadSession>> StartBatchUpload(
      const std::vector<BatchArraySpec>& arrays, const PlacementRule& rule, const std::string& name,
      const TensorOwner& owner) const;

  // NOT_FOUND for unknown ids; see DownloadPlan::Create.
  absl::StatusOr<std::unique_ptr<DownloadPlan>> OpenDownload(
      const std::string& id, const DownloadSelection& selection) const;

  // Places every tensor under `rule` (RuleScope::kGroupMember), in request
  // order. All or nothing: on error nothing new is kept and the sources are
  // intact. kDonate deletes the sources once every result exists. `name`
  // renames a single result (INVALID_ARGUMENT with several ids); results keep
  // their source's name and owner otherwise.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Place(
      const std::vector<std::string>& ids, const PlacementRule& rule, SourceHandling source,
      const std::string& name) const;

  absl::StatusOr<std::shared_ptr<const Tensor>> Assemble(Shape global_shape,
                                                         const TensorPlacement& placement,
                                                         const std::vector<std::string>& ids,
                                                         SourceHandling source,
                                                         std::string name) const;

  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Disassemble(
      const std::string& id, SourceHandling source) const;

  // Returns how many tensors were deleted with the mesh. NOT_FOUND for an
  // unknown mesh; FAILED_PRECONDITION while tensors use it and !force.
  absl::StatusOr<int64_t> DeleteMesh(const std::string& mesh_id, bool force) const;
  // DeleteMesh on this daemon alone, whatever the remover: what a daemon
  // does when the coordinator removes a mesh everywhere.
  absl::StatusOr<int64_t> DeleteMeshHere(const std::string& mesh_id, bool force) const;

  // In a cluster the coordinator removes meshes from every daemon
  // (server/cluster/cluster_meshes.h): with a remover set, DeleteMesh makes
  // its checks here, then returns remover(mesh_id, force). REQUIRES: set
  // before serving.
  using MeshRemover =
      std::function<absl::StatusOr<int64_t>(const std::string& mesh_id, bool force)>;
  void set_mesh_remover(MeshRemover remover) { mesh_remover_ = std::move(remover); }

 private:
  TensorStore* store_;
  MeshRegistry* meshes_;
  PlacementResolver resolver_;
  MeshRemover mesh_remover_;
  RemoteShards* remote_ = nullptr;
  DistributedOps* distributed_ = nullptr;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_OPS_H_
