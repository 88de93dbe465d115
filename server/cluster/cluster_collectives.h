// ClusterCollectives: the cluster's DistributedCollectives -- collectives on
// tensors whose shards span daemons (docs/cluster.md), as the collective
// core hands them over (CollectiveServiceCore::Execute). It decides whether
// a request spans daemons (its inputs' shards, its controller) and
// orchestrates it; a request whose inputs are all here and that is
// single-controller runs on this daemon alone. Every daemon holding shards
// of the input runs its part -- the same CollectiveServiceCore::Run on its
// own shards -- and the cluster engine (server/collective/cluster/
// cluster_engine.h) moves the bytes between daemons over the platform's
// cross-process transport, in ticket order.
//
// Two ways to ask (Controller):
//   single   Drive: one call on any daemon; it numbers the call in its own
//            sequence for the set (per driver, epoch and generation: no
//            coordinator round trip; each driver's calls run on transport
//            groups of their own), sends the request to every participant
//            (PeerTransport::StartPrepareCollective, all at once), each runs
//            its part in that order and holds its results pending, then the
//            driver commits them everywhere (or aborts them everywhere; a
//            failed call moves the driver's set to a new generation). When
//            the driver takes part, the other participants install their
//            results as their parts succeed (presumed commit, Participate):
//            the driver commits its own part and tells only the daemons
//            without shards -- no commit round among the participants.
//   multi    RunMulti: JAX multi-controller -- every participant's trainer
//            makes the same calls on its own daemon, in the same order (as
//            NCCL and torch.distributed require). Per (tenant, participant
//            set) each daemon numbers its calls itself: the n-th call is
//            the same collective everywhere. The coordinator is met only
//            when the set forms -- its first call, and the first after a
//            failed call or a membership change that touched the set
//            (barrier "mcs/<set>/form": the same request everywhere, the
//            formation's epoch, generation and a random token from which
//            every daemon derives the same result ids). In the steady state
//            the cluster engine runs the collective at once (with
//            --cluster_check_collectives it first checks, in one small
//            exchange, that every daemon asked for the same call; without,
//            a part that failed before it forfeits and the others name it
//            -- except for a call with a spanning group that leaves a
//            participant out, which is checked all the same: Number
//            marks it from the request's plan, CrossProcessTicket::
//            partial_groups);
//            each daemon commits its part (ClusterEngine::Settle passes the
//            turn on). A
//            peer's read of a result this daemon numbered but has not
//            committed yet waits for it (AwaitSettled), so once any
//            participant's call returned the results are readable on every
//            participant. The lowest participant tells the daemons without
//            shards.
//
// Failures end UNAVAILABLE naming a lost daemon when membership lost one,
// otherwise with the engine's error; results are freed everywhere. A donated
// input that a failure interrupted is consumed (deleted everywhere), as on
// one daemon.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
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
  // Ends a call-ordered (multi-controller) ticket with this daemon's
  // outcome and returns the agreed one: the cluster engine's Settle.
  using Settle =
      std::function<absl::Status(const CrossProcessTicket&, const absl::Status&, bool* late)>;
  // Set once, before the first collective.
  void set_settle(Settle settle) { settle_ = std::move(settle); }

  // Waits (up to `deadline`) while `tensor_id` is a result of a
  // multi-controller call running here that has not committed or failed
  // yet: a peer reading it right after its own call returned finds it.
  // Whether it is settled (a `deadline` of now only looks).
  bool AwaitSettled(const std::string& tensor_id, absl::Time deadline);

  // The cluster's membership changed: multi-controller sets that hold a
  // process lost or rejoined since (every set when the coordinator or this
  // daemon was lost) form again at their next call.
  void OnClusterEvent(const ClusterEvent& event);

  // DistributedCollectives. Multi-controller calls are numbered per
  // (tenant, participant set): the n-th such call on every daemon is the
  // same collective, and the participants' requests must encode alike.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Execute(
      const CollectiveRequest& request, const std::string& tenant,
      const CollectiveContext& context) override;

  // The daemons holding shards of `tensor` (ascending).
  std::vector<int32_t> ParticipantsOf(const Tensor& tensor) const;
  // The live daemons not among `participants` (ascending): those that hold
  // a call's records but none of its shards.
  std::vector<int32_t> NonParticipants(const std::vector<int32_t>& participants) const;

  // This daemon's part of a collective with `ticket`: runs `request` on its
  // shards, holds the results pending for `driver` under `result_ids`.
  // Returns the results' records. A failed part of a coordinator-issued
  // ticket is forfeited (set_forfeit); a call-ordered ticket's failure is
  // the caller's to settle. A part for another daemon that takes part
  // itself (InstallsAtOnce) installs its results (and deletes donated
  // inputs) as soon as it succeeded -- presumed commit: that driver sends
  // no Commit, only an Abort when another part failed -- so a result is
  // readable on every participant once the driver returned it.
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> Participate(
      const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
      int32_t driver, const CollectiveRequest& request, const CollectiveContext& context,
      const CrossProcessTicket& ticket);

 private:
  // Single controller: `request`'s results on every participant, committed
  // everywhere; its donated inputs are deleted everywhere once they exist.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Drive(
      const std::vector<int32_t>& participants, const CollectiveRequest& request,
      const CollectiveContext& context);
  // Whether this daemon's part of a single-controller call that `driver`
  // drives installs its results when it ends: `driver` is another
  // participant.
  bool InstallsAtOnce(const std::vector<int32_t>& participants, int32_t driver) const;
  // A multi-controller participant set (per tenant) as this daemon knows it.
  struct MultiSet {
    explicit MultiSet(std::vector<int32_t> p) : participants(std::move(p)) {}
    const std::vector<int32_t> participants;
    // Set by OnClusterEvent and by a failed call: form again.
    std::atomic<bool> stale{false};
    absl::Mutex mu;  // held while numbering (and forming)
    bool formed ABSL_GUARDED_BY(mu) = false;
    uint64_t epoch ABSL_GUARDED_BY(mu) = 0;
    uint64_t generation ABSL_GUARDED_BY(mu) = 0;
    std::string token ABSL_GUARDED_BY(mu);
    uint64_t next ABSL_GUARDED_BY(mu) = 0;
  };
  // This driver's single-controller calls on one participant set.
  struct DriverSequence {
    uint64_t epoch = 0;
    uint64_t generation = 0;
    uint64_t next = 0;
  };
  // The next ticket of this driver's sequence for `participants`.
  CrossProcessTicket NextDriverTicket(const std::vector<int32_t>& participants);
  // A call with `ticket` failed: the sequence moves to a new generation.
  void DriverTicketFailed(const CrossProcessTicket& ticket);

  // A numbered multi-controller call.
  struct MultiCall {
    CrossProcessTicket ticket;
    std::vector<std::string> result_ids;
  };

  // Multi controller: numbers the call in its set (forming the set first
  // when it must) and runs it.
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> RunMulti(
      const std::string& tenant, const std::vector<int32_t>& participants,
      const CollectiveRequest& request, const CollectiveContext& context);
  // Without --cluster_check_collectives (where it matters), the call's
  // ticket says partial_groups when one of the request's groups that spans
  // daemons (CollectiveServiceCore::DeviceGroups) does not hold every
  // participant, when none spans daemons, or when it cannot be planned.
  absl::StatusOr<MultiCall> Number(const std::string& set_key,
                                   const std::vector<int32_t>& participants,
                                   const CollectiveRequest& request);
  // Meets the set's other daemons at the coordinator ("mcs/<set>/form").
  absl::Status Form(MultiSet& set, const std::string& set_key, const std::string& encoded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(set.mu);
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
  Settle settle_;
  absl::Mutex mu_;
  // Multi-controller sets by key ("mc/0,1" or "mc/0,1/t<tenant hash>").
  std::map<std::string, std::shared_ptr<MultiSet>> sets_ ABSL_GUARDED_BY(mu_);
  // This driver's single-controller sequences by set key.
  std::map<std::string, DriverSequence> driver_sequences_ ABSL_GUARDED_BY(mu_);
  // Result ids of multi-controller calls numbered here and not settled yet.
  absl::flat_hash_set<std::string> in_flight_ ABSL_GUARDED_BY(mu_);
  absl::CondVar settled_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_COLLECTIVES_H_
