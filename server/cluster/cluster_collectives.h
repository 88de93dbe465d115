// ClusterCollectives: the cluster's DistributedCollectives -- collectives on
// tensors whose shards span daemons (docs/cluster.md), as the collective
// core hands them over (CollectiveServiceCore::Execute). It decides whether
// a request spans daemons (its inputs' shards, its controller) and
// orchestrates it; a request whose inputs are all here and that is
// single-controller runs on this daemon alone. Every daemon holding shards
// of the input runs its part -- the same CollectiveServiceCore::Run on its
// own shards -- and the cluster engine (server/collective/cluster/
// cluster_engine.h) moves the bytes between daemons over the platform's
// cross-process transport, in the order the coordinator's tickets give:
// every part first meets the others at a barrier ("<op>/start") that hands
// out the process set's next ticket.
//
// Two ways to ask (Controller):
//   single   Drive: one call on any daemon; it sends the request to every
//            participant (PeerTransport::PrepareCollective), each runs its
//            part and holds
//            its results pending, then the driver commits them everywhere
//            (or aborts them everywhere).
//   multi    RunMulti: JAX multi-controller -- every participant's trainer
//            makes the same call on its own daemon. The start barrier checks
//            they agree (the requests' bytes) and names the results (its
//            shared token); each daemon commits its own part, then a done
//            barrier agrees on success (so once any participant's call
//            returned, the results are readable on every participant; a
//            failure elsewhere deletes them again), and the lowest
//            participant tells the daemons without shards.
//
// Failures end UNAVAILABLE naming a lost daemon when membership lost one,
// otherwise with the engine's error; results are freed everywhere. A donated
// input that a failure interrupted is consumed (deleted everywhere), as on
// one daemon.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/cluster/cluster.h"
#include "server/cluster/cluster_tensors.h"
#include "server/cluster/peer_transport.h"
#include "server/collective/collective_request.h"
#include "server/collective/collective_service_core.h"
#include "server/collective/distributed_collectives.h"

namespace placement::server {

class ClusterCollectives final : public DistributedCollectives {
 public:
  // REQUIRES: every argument outlives this object.
  ClusterCollectives(Cluster* cluster, const CollectiveServiceCore* core, ClusterTensors* tensors,
                     PeerTransport* peers)
      : cluster_(cluster), core_(core), store_(core->store()), tensors_(tensors), peers_(peers) {}

  // Called when this daemon's part of a ticketed collective failed, with
  // the ticket, the participants and the failure: the cluster engine's
  // Forfeit, so that peers already inside the collective fail at once.
  using Forfeit = std::function<void(const CrossProcessTicket&, const std::vector<int32_t>&,
                                     const absl::Status&)>;
  // Set once, before the first collective.
  void set_forfeit(Forfeit forfeit) { forfeit_ = std::move(forfeit); }

  // DistributedCollectives. Multi-controller calls are told apart by
  // (tenant, inputs, kind): the n-th such call on every daemon is the same
  // collective, and the participants' requests must encode alike.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Execute(
      const CollectiveRequest& request, const std::string& tenant,
      const CollectiveContext& context) override;

  // The daemons holding shards of `tensor` (ascending).
  std::vector<int32_t> ParticipantsOf(const Tensor& tensor) const;

  // This daemon's part of collective `op_key`: meets the other participants,
  // runs `request` on its shards, holds the results pending for `driver`
  // under `result_ids`. Returns the results' records. `payload` must be the
  // same on every participant (INVALID_ARGUMENT naming both otherwise).
  // With `given` (a single-controller driver took the ticket for everyone)
  // there is no meeting.
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> Participate(
      const std::string& op_key, const std::vector<int32_t>& participants,
      const std::vector<std::string>& result_ids, int32_t driver, const std::string& payload,
      const CollectiveRequest& request, const CollectiveContext& context,
      const CrossProcessTicket* given = nullptr);

 private:
  // Single controller: `request`'s results on every participant, committed
  // everywhere; its donated inputs are deleted everywhere once they exist.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Drive(
      const std::vector<int32_t>& participants, const CollectiveRequest& request,
      const CollectiveContext& context);
  // Multi controller: `key` names the call the same way on every daemon.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> RunMulti(
      const std::string& key, const std::vector<int32_t>& participants,
      const CollectiveRequest& request, const CollectiveContext& context);
  // Tells forfeit_ (when set) that this daemon's part of `ticket` failed.
  void Forfeited(const CrossProcessTicket& ticket, const std::vector<int32_t>& participants,
                 const absl::Status& status);
  // The error to report for a failed part: a lost participant named when
  // membership lost one.
  absl::Status Explain(const absl::Status& status, const std::vector<int32_t>& participants) const;

  Cluster* cluster_;
  const CollectiveServiceCore* core_;
  TensorStore* store_;
  ClusterTensors* tensors_;
  PeerTransport* peers_;
  Forfeit forfeit_;
  absl::Mutex mu_;
  // Multi-controller calls made so far per key: the n-th call of a key on
  // every daemon is the same collective.
  std::map<std::string, int64_t> calls_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_
