// ClusterOps: reshard, assemble and disassemble of tensors whose shards
// span daemons (DistributedOps for TensorOps), in two phases:
//
//   driver (the daemon the client called)    every daemon holding result shards
//   ---------------------------------------   ---------------------------------
//   pick the result id(s)
//   Prepare ----------------------------------> make its own result shards
//                                               (pulling only the remote boxes
//                                               it needs, ReadBox), hold them
//                                               pending
//   all prepared: Commit everywhere ----------> pending shards become the
//                                               tensor's; records installed on
//                                               every daemon; donated sources
//                                               deleted
//   any failure: Abort -----------------------> pending shards freed
//
// A driver that dies between the phases leaves pending shards that their
// daemons free when membership reports its loss (or after the pending
// lifetime). The participant side (PreparePlace, ...) runs on the daemons
// that PeerService.Prepare reaches, and on the driver itself for its own
// shards.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_OPS_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_data.h"
#include "server/cluster/cluster_tensors.h"
#include "server/cluster/peer_transport.h"
#include "server/tensor/distributed_ops.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

class ClusterOps final : public DistributedOps {
 public:
  // REQUIRES: every argument outlives this object.
  ClusterOps(Cluster* cluster, TensorStore* store, ClusterTensors* tensors, ClusterData* data,
             PeerTransport* peers)
      : cluster_(cluster), store_(store), tensors_(tensors), data_(data), peers_(peers) {}

  // --- driver (DistributedOps) -------------------------------------------------
  absl::StatusOr<std::shared_ptr<const Tensor>> Place(const Tensor& source,
                                                      const ResolvedSharding& target,
                                                      std::string name, TensorOwner owner) override;
  absl::StatusOr<std::shared_ptr<const Tensor>> Assemble(Shape global_shape,
                                                         const ResolvedSharding& target,
                                                         const std::vector<std::string>& ids,
                                                         SourceHandling source,
                                                         std::string name) override;
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Disassemble(
      const std::string& id, SourceHandling source) override;

  // --- participant (PeerService.Prepare) ----------------------------------------
  // Each makes this daemon's shards of `result` (a record: id, layout,
  // name, owner) and holds them pending for `driver`.
  absl::Status PreparePlace(const std::string& source_id, const Tensor& result, int32_t driver,
                            absl::Duration lifetime);
  absl::Status PrepareAssemble(const std::vector<std::string>& piece_ids, const Tensor& result,
                               SourceHandling source, int32_t driver, absl::Duration lifetime);
  absl::Status PrepareDisassemble(const std::string& source_id,
                                  const std::vector<std::string>& result_ids, SourceHandling source,
                                  int32_t driver, absl::Duration lifetime);

 private:
  // Runs `prepare` (the Prepare fanned out to every process of
  // `processes`, this daemon's part included) once every process is alive,
  // then commits `records` everywhere (deleting `delete_ids`), or aborts
  // them on `processes` on failure. `prepare` sets how many parts
  // succeeded. `delete_ids` are donated inputs, which each part takes all
  // or none of: a failure after some part took them deletes them
  // everywhere too (the status says they were consumed); one where no part
  // did keeps them.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> RunTwoPhase(
      const std::vector<int32_t>& processes, const std::function<absl::Status(int*)>& prepare,
      std::vector<std::unique_ptr<Tensor>> records, const std::vector<std::string>& delete_ids);
  // The daemons holding shards of a tensor laid out as `sharding`.
  std::vector<int32_t> ProcessesOf(const NamedSharding& sharding) const;

  Cluster* cluster_;
  TensorStore* store_;
  ClusterTensors* tensors_;
  ClusterData* data_;
  PeerTransport* peers_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_OPS_H_
