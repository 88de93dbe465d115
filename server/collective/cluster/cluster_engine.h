// ClusterEngine: collectives whose groups span the daemons of a cluster (one
// daemon = one process, index 0..P-1; device ids are global). Items whose
// every rank is on this process go to the platform's intra-node engine;
// items that reach other processes run on the cross-process transport the
// platform chose (CrossProcessTransport, server/collective/transport/): one
// call per spanning item on the group of the item's subset. The engine
// knows only that contract; with "gloo" this process's ranks are combined
// on the host and one Gloo participant per process moves the per-process
// results.
//
// Ordering. Calls that span processes carry a CrossProcessTicket
// (CollectiveContext::ticket) from the cluster coordinator. Per (set,
// epoch), this process runs calls in ticket order (TicketSequencer): ticket
// t waits for tickets 0 .. t-1 to finish here, a predecessor missing for
// `gap_timeout` is skipped (logged), and a ticket whose turn has passed is
// refused. Every process of the set receives every ticket of the set, also
// one whose items give it no rank (it passes the ticket on). A process
// lists only the items it holds ranks of; the items of one subset (below)
// must appear in the same relative order on every process of the subset.
// A call with a ticket runs entirely in its turn, all-local items included.
// An item must have the same group, dtype, op, root and block size on every
// process (each checks only its own buffers).
//
// Call-ordered tickets (CrossProcessTicket::call_ordered: multi-controller
// calls, numbered by every process itself). Their set is a formation --
// (set, epoch, generation) agreed once at the coordinator by the caller --
// with its own sequencer, which skips no gap (every predecessor comes: this
// process numbered it); a newer formation of the set retires the older
// one (its sequencer closes, its transport groups are aborted), and an
// epoch change does not (a formation lives until its set re-forms, so an
// unrelated membership change costs its calls nothing). In its turn such a
// call runs its items at once (steady state: nothing but the collective);
// its tags derive from the call's number and request digest, so processes
// that asked for different calls never exchange each other's bytes (they
// wait until `timeout`, as NCCL ranks that disagree do). A checked call
// first exchanges one small word per process on the set's full group
// (call_agreement.h: number, request digest, status so far) -- one more
// round per call -- and calls that differ fail at once, INVALID_ARGUMENT
// naming both processes. A call is checked with check_calls
// (--cluster_check_collectives), and also without it when its ticket says
// partial_groups (a spanning group of the call leaves a process of the set
// out, or none spans processes; the caller derives that from the request,
// alike everywhere).
// The turn is kept after Run returns: the caller commits its part and then
// calls Settle, which passes the turn on.
//
// An unchecked call's part that fails before its items (nothing
// allocated; Settle without Run, or Run refusing its items) forfeits the
// call: it leaves a notice in `store` (its process, the call, the failure),
// closes its connections of that generation and marks the generation given
// up (GenerationAbandonedKey, as Forfeit does), so the others' items fail
// at once, inside an operation or still in its rendezvous; they read the
// notice and fail ABORTED "process P failed its part: ...". That reaches every process only because
// every spanning group of an unchecked call holds the whole set: each other process has an item
// with the failing one, which cannot complete. (A checked call tells the
// failure in the round instead and nobody runs the items -- hence
// partial_groups.) A part that fails after its items started (the items, or
// the caller's commit) may have let the others' calls return: it is told in
// the set's next call, which fails everywhere (forfeited here, ABORTED
// naming it elsewhere), so every process stays at the same number; the
// caller then forms the set again.
//
// Groups. Each spanning item runs on the transport's group of (epoch, set,
// generation, subset), where the subset is the sorted distinct processes of
// the item's group; the transport connects it on first use through the
// cluster's rendezvous store. After any failure of a group (timeout, lost
// peer, rendezvous) the transport aborts it and refuses its key, and
// `on_failure` tells the cluster, which bumps the set's generation.
// DropEpochsBefore frees the groups and sequencers of retired epochs.
// Tags derive from the ticket, so CollectiveContext::tag is ignored.
//
// Numerics as the intra-node engines (wire_reduction.h): integers and
// f32 / f64 combine in their dtype, f16 / bf16 accumulate in f32 and round
// once, integer MEAN sums in i64 and truncates toward zero; MEAN divides by
// the group size.
//
// Errors (besides CollectiveEngine::Run's INVALID_ARGUMENT, naming item,
// rank and numbers):
//   FAILED_PRECONDITION  a spanning item without a ticket; a ticket whose
//                        turn has passed or whose epoch was retired.
//   DEADLINE_EXCEEDED    a transport operation or rendezvous timed out: each
//                        gets min(timeout, time left before the call's
//                        deadline).
//   UNAVAILABLE          a peer died or closed its connections; a group
//                        that failed before was asked for again. The message
//                        names the subset: "gloo all_reduce over processes
//                        0,1 (item 0, set 0,1, epoch 3, generation 0,
//                        ticket 7): Connection closed by peer ...".
//   FAILED_PRECONDITION  also: no transport (the build has none).
//   CANCELLED            as CollectiveContext says (checked while waiting
//                        for the turn and between items; a running transport
//                        operation cannot be interrupted).
// A call refused before its turn (invalid items, cancelled while waiting)
// counts as finished here, so its successors do not wait for it; its peers
// then time out in the items this process never ran. A caller that fails
// before it reaches Run (a result it could not allocate) says so with
// Forfeit, which makes the peers fail at once instead.
//
// Thread-safe: calls of different sets run in parallel; calls of one set
// run one at a time, in ticket order.
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ENGINE_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ENGINE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/cluster/call_agreement.h"
#include "server/collective/cluster/cluster_item.h"
#include "server/collective/cluster/ticket_sequencer.h"
#include "server/collective/collective_engine.h"
#include "server/collective/transport/cross_process_transport.h"
#include "server/collective/transport/rendezvous_store.h"

namespace placement::server {

struct ClusterEngineOptions {
  // The platform's intra-node engine, for items entirely on this process.
  // Not owned; outlives the engine.
  CollectiveEngine* local = nullptr;
  // Moves the bytes of spanning items. Not owned; outlives the engine. Null
  // in a build without one: spanning items fail FAILED_PRECONDITION.
  CrossProcessTransport* transport = nullptr;
  // This process, and the process owning a device id (negative: none);
  // process_of is called concurrently and must be thread-safe.
  int32_t process_index = 0;
  std::function<int32_t(int64_t device_id)> process_of;
  // Bounds each transport operation and each rendezvous's wait for the
  // other processes (with the call's deadline). A peer that publishes its
  // address and dies before connecting can hold a rendezvous for up to
  // `timeout` more per pair (Gloo's connect timeout).
  absl::Duration timeout = absl::Seconds(30);
  // How long a ticket waits for a missing predecessor before skipping it
  // (not a call-ordered one: this process numbered its predecessors itself,
  // and each one comes).
  absl::Duration gap_timeout = absl::Seconds(5);
  // Call-ordered tickets: exchange a word per call before the items
  // (see above). Off: a call runs alone and a part that fails first leaves
  // the forfeit notice below -- except a call whose ticket says
  // partial_groups, which is checked all the same (its groups could not
  // carry the forfeit to every process of the set).
  bool check_calls = false;
  // Where a call-ordered part that fails first leaves its forfeit notice for
  // the others (the coordinator's key-value store). Not owned; outlives the
  // engine. Null: the others' error is the transport's ("Connection closed
  // by peer").
  RendezvousStore* store = nullptr;
  // Called (on the failing call's thread, before its ticket's successors
  // may run) with the call's ticket and status after each failure of a
  // transport group, so the cluster can bump the set's generation. Must not
  // wait for calls of the same set. May be null.
  std::function<void(const CrossProcessTicket&, const absl::Status&)> on_failure;
};

class ClusterEngine final : public CollectiveEngine {
 public:
  // INVALID_ARGUMENT for a missing collaborator, a negative process index
  // or a non-positive timeout.
  static absl::StatusOr<std::unique_ptr<ClusterEngine>> Create(ClusterEngineOptions options);
  // REQUIRES: no call of this engine in flight.
  ~ClusterEngine() override;

  absl::string_view Name() const override { return "cluster"; }
  absl::Status Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                   const CollectiveContext& context) override;

  // This process will not run `ticket` (its caller failed before calling
  // Run, e.g. allocating a result): in the ticket's turn here, this
  // process's groups of the ticket's generation are closed, the store is
  // told that the generation was given up (GenerationAbandonedKey, with
  // `why`), and the failure is reported (on_failure: a new generation).
  // Peers inside the ticket's operations then fail at once (UNAVAILABLE,
  // "Connection closed by peer"), and peers waiting for this process in a
  // rendezvous of the generation -- of the set (`participants`, ascending,
  // this process included) or of a subset it never reached -- within one
  // poll, with `why`, rather than after `timeout`. Waits at most
  // `gap_timeout` for the turn. No-op when the ticket already ran or was
  // refused here (its turn passed), or for a set of one process. The key
  // is deleted at this process's first call (or forfeit) of the set's next
  // generation, at its first call of any set 2 x `timeout` later, or when
  // DropEpochsBefore retires the key's epoch.
  void Forfeit(const CrossProcessTicket& ticket, const std::vector<int32_t>& participants,
               const absl::Status& why);

  // Ends call-ordered `ticket` here with `here`, this process's outcome of
  // the call (OK, or why its part failed -- also before Run was reached, or
  // when Run was never called), and passes the turn on. When Run never held
  // the turn, the call's round happens here (a failure tells the others to
  // skip the items; their verdict is returned). A failure after the round
  // passed is `*late` (when given): the others learn it in the set's next
  // call. Returns `here` otherwise.
  // REQUIRES: called exactly once for every call-ordered ticket this
  // process numbered, after Run (if any) returned.
  absl::Status Settle(const CrossProcessTicket& ticket, const absl::Status& here,
                      bool* late = nullptr);

  // Membership changed: frees the groups and sequencers of epochs before
  // `epoch`. Calls of those epochs that wait for their turn, and later ones,
  // fail with FAILED_PRECONDITION; running calls finish on the contexts
  // they hold. Call-ordered formations are kept (see above), with their
  // transport groups and their forfeited generation's key; every other
  // group of those epochs goes.
  void DropEpochsBefore(uint64_t epoch);

  // The cluster lost `process`, a member of membership epoch `epoch` (the
  // view before the loss): every transport group of that epoch or an older
  // one holding it is aborted (a later epoch's group holds its next
  // incarnation, which rejoined: untouched), so
  // a call in flight with it ends at once, UNAVAILABLE with `why`, instead
  // of at its operation timeout -- also a call whose group is still in its
  // rendezvous, waiting for the lost process to publish. A call that
  // reaches a group of that epoch or an older one holding the process
  // later (it started before this daemon heard of the loss) is refused at
  // once with `why` instead of waiting in a rendezvous the lost process
  // never joins: the process comes back, if ever, in a later epoch. (Not
  // the view after the loss: one still forming after a coordinator restart
  // lists members that have not joined yet as not alive.)
  void AbortProcess(int32_t process, uint64_t epoch, const std::string& why);

  // Connected transport groups held (tests, metrics).
  size_t cached_contexts() const {
    return options_.transport != nullptr ? options_.transport->connected_groups() : 0;
  }

 private:
  explicit ClusterEngine(ClusterEngineOptions options) : options_(std::move(options)) {}

  // The sequencer of the ticket's set and epoch; FAILED_PRECONDITION when
  // the epoch was retired.
  absl::StatusOr<std::shared_ptr<TicketSequencer>> SequencerFor(const CrossProcessTicket& ticket);
  // Run for a call-ordered ticket.
  absl::Status RunOrdered(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                          const CollectiveContext& context);
  // Whether call-ordered `ticket` has its agreement round: check_calls, or
  // a call with a spanning group that leaves one of the set's processes out
  // (or with none).
  bool Checked(const CrossProcessTicket& ticket) const {
    return options_.check_calls || ticket.partial_groups;
  }
  // The agreement round of a call-ordered ticket on the set's full group.
  absl::Status Agree(const CrossProcessTicket& ticket, const absl::Status& mine);
  // An unchecked call: this process gives up call-ordered `ticket` with
  // `why` in its turn (notice, then the generation's connections closed).
  void ForfeitOrdered(const CrossProcessTicket& ticket, const absl::Status& why);
  // The notice another process left for `ticket`, as the error to report,
  // waiting up to `wait` for one; nullopt when there is none.
  std::optional<absl::Status> ForfeitedBy(const CrossProcessTicket& ticket, absl::Duration wait);
  // Closes this process's connections of `ticket`'s generation, says in
  // the store that the generation was given up (GenerationAbandonedKey:
  // peers waiting for this process in a rendezvous of the generation --
  // the full set's or a subset's it never reached -- fail at once), and
  // reports the forfeit.
  void CloseForfeited(const CrossProcessTicket& ticket, const absl::Status& why);
  // Leaves this process's notice that its part of `ticket` fails with `why`.
  void PostNotice(const CrossProcessTicket& ticket, const absl::Status& why);
  // Takes the failure of the set's previous call that its next call must
  // tell (OK when none).
  absl::Status TakeLate(const std::string& set_key);
  // Runs a planned call in its ticket's turn.
  absl::Status RunInTurn(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                         const std::vector<ClusterItemPlan>& plans,
                         const CollectiveContext& context);
  // Spanning item `index` of the call, the `ordinal`-th on its subset, on
  // the subset's transport group.
  absl::Status RunSpanning(CollectiveKind kind, size_t index, uint32_t ordinal,
                           const CollectiveItem& item, const ClusterItemPlan& plan,
                           const CollectiveContext& context);
  void ReportFailure(const CrossProcessTicket& ticket, const absl::Status& status);
  // min(timeout, time left before the deadline).
  absl::Duration Budget(const CollectiveContext& context) const;

  const ClusterEngineOptions options_;
  // AbortProcess calls so far, per process: a call that failed while one of
  // its set's processes was aborted was ended by the cluster (a lost
  // process), not by a forfeit.
  uint64_t AbortsOf(const std::vector<int32_t>& processes);
  // UNAVAILABLE with the loss's words when a process of `key`'s subset was
  // lost in `key`'s epoch or a later one (AbortProcess); OK otherwise.
  // `what` names the call's step.
  absl::Status RefuseLost(const TransportGroupKey& key, absl::string_view what);
  absl::Mutex aborts_mu_;
  std::map<int32_t, uint64_t> aborts_ ABSL_GUARDED_BY(aborts_mu_);
  // Per lost process: the latest epoch it was lost in, and the words.
  struct Loss {
    uint64_t epoch = 0;
    std::string why;
  };
  std::map<int32_t, Loss> lost_ ABSL_GUARDED_BY(aborts_mu_);
  absl::Mutex mu_;
  uint64_t min_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // (epoch, set key) -> sequencer.
  std::map<std::pair<uint64_t, std::string>, std::shared_ptr<TicketSequencer>> sequencers_
      ABSL_GUARDED_BY(mu_);
  // Call-ordered sets: the live formation of each set key.
  struct Formation {
    uint64_t epoch = 0;
    uint64_t generation = 0;
    std::shared_ptr<TicketSequencer> sequencer;
    // The ticket whose round passed here (its items may run), if any.
    std::optional<uint64_t> passed;
    // A failure after a passed round, told in the next call's round.
    absl::Status late;
  };
  std::map<std::string, Formation> formations_ ABSL_GUARDED_BY(mu_);
  // Per set: the (epoch, generation) this process gave up last, whose
  // GenerationAbandonedKey it deletes at the set's first call of another
  // generation here -- every process has left the abandoned call by then
  // (a driver numbers a new generation only once every part of the failed
  // call returned; a call-ordered set forms again with every process).
  // A set never called again has its key deleted by the first call of any
  // set here once 2 x `timeout` passed since (every peer's wait in that
  // generation began within a budget of `timeout` of it, or found the key
  // at once), or when DropEpochsBefore retires the key's epoch.
  struct Abandoned {
    uint64_t epoch = 0;
    uint64_t generation = 0;
    absl::Time at;  // when this process gave it up
  };
  std::map<std::string, Abandoned> abandoned_ ABSL_GUARDED_BY(mu_);
  // Deletes the keys of abandoned generations that `ticket` (a call here)
  // shows are over, as above.
  void RetireAbandoned(const CrossProcessTicket& ticket);
  // Takes the entries `over` says are over out of abandoned_ and deletes
  // their keys in the store.
  void DeleteAbandoned(absl::FunctionRef<bool(const std::string& set, const Abandoned&)> over);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_CLUSTER_ENGINE_H_
