// CrossProcessTransport: the one contract for moving a collective's bytes
// between the daemons (processes) of a cluster, as the cluster engine
// (server/collective/cluster/cluster_engine.h) uses it:
//
//   Run      one collective item, as planned for this process
//            (ClusterItemPlan: its ranks, their buffers, the subset), with
//            every process of the subset running the same item with the
//            same tag; the first operation on a group connects it, through
//            the coordinator's RendezvousStore (each process publishes what
//            the others need -- Gloo: its listening address; NCCL: rank 0
//            its unique id, as XLA's nccl_id_store does -- under the
//            group's prefix and reads the others'), and later ones find it;
//   Exchange a small fixed-size block with every process of a group (an
//            all-gather of a few hundred bytes): the cluster engine's
//            agreement rounds of multi-controller calls with
//            --cluster_check_collectives (the same request,
//            every part's outcome) without a coordinator round trip;
//   Abort    a group: its connections close, so peers inside an operation
//            on it fail at once, and its key is refused from then on (its
//            rendezvous keys are spent; the cluster bumps the set's
//            generation, which names a fresh group);
//   AbortProcess  every group that holds a process the cluster lost: an
//            operation in flight on one ends at once with the cluster's
//            words, instead of waiting out its timeout for a peer that is
//            cut off (a partition sends no FIN, so nothing else would end
//            it before the operation's budget); so does a group still in
//            its rendezvous, waiting for the lost process's entry.
//
// A group is named by (membership epoch, process set, set generation,
// subset) -- TransportGroupKey. Transports register by name
// (transport_registry.h); a platform names the one its buffers use
// (Platform::CrossProcessTransport): "gloo" moves host memory and stages
// device buffers through the DeviceBackend, so every platform can use it.
//
// Errors of Run and Exchange (a failure aborts the group):
//   DEADLINE_EXCEEDED  a process of the subset did not publish within the
//                      budget, or an operation timed out;
//   UNAVAILABLE        a peer died or closed its connections; the key failed
//                      before (the set needs a new generation);
//   the backend's      a rank buffer could not be read or written.
//
// Thread-safe: groups of different keys connect and run in parallel;
// calls on one group must not overlap (the cluster engine runs a set's
// calls in ticket order).
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_CROSS_PROCESS_TRANSPORT_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_CROSS_PROCESS_TRANSPORT_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "server/collective/cluster/cluster_item.h"
#include "server/collective/collective_engine.h"
#include "server/collective/transport/rendezvous_store.h"
#include "server/device/device_backend.h"

namespace placement::server {

struct TransportGroupKey {
  uint64_t epoch = 0;
  std::string set_key;
  uint64_t generation = 0;
  // The subset: ascending, this process included.
  std::vector<int32_t> processes;

  // "e3/s0,1,3/g0/p0,1": unique per group; a transport puts its name in
  // front for its rendezvous keys ("gloo/e3/...").
  std::string Name() const;
  // The same with an empty subset ("e3/s0,1,3/g0/p"): every group of the
  // set's generation starts with it.
  std::string GenerationStem() const;
};

// "abandoned/e3/s0,1,3/g0/why": where a process that gave up a call of the
// set's generation before its items (the cluster engine's forfeit) says
// why. A transport's rendezvous for a group of that generation watches it
// (AbortableRendezvousStore's `watch`): peers waiting for that process's
// entry in a group it never joins -- a subset of the set, for an item it
// did not reach -- fail UNAVAILABLE with those words within one poll,
// instead of waiting out their budget.
std::string GenerationAbandonedKey(uint64_t epoch, const std::string& set_key, uint64_t generation);

// What every transport is made from.
struct CrossProcessTransportOptions {
  // The coordinator's key-value store. Not owned; outlives the transport.
  RendezvousStore* store = nullptr;
  // This process's devices: rank buffers are read and written through it
  // (in place when host-addressable). Not owned; outlives the transport.
  DeviceBackend* backend = nullptr;
  int32_t process_index = 0;
  // The address of the interface peers reach this process on (the host of
  // its advertised peer address); a transport that listens binds only it.
  std::string hostname = "127.0.0.1";
};

// INVALID_ARGUMENT "<name> transport: ..." for options without a store or
// backend, or with a negative process index: what every factory checks
// first.
absl::Status CheckTransportOptions(absl::string_view name,
                                   const CrossProcessTransportOptions& options);

class CrossProcessTransport {
 public:
  virtual ~CrossProcessTransport() = default;

  // The registered name ("gloo").
  virtual absl::string_view Name() const = 0;
  // Where the transport listens for its peers (the numeric host it binds,
  // "10.0.0.2"), for the log and tests; empty for one that does not listen.
  virtual std::string ListenAddress() const = 0;
  // Whether the bytes it moves are encrypted on the wire (the daemon warns
  // when TLS is on and they are not).
  virtual bool encrypted() const = 0;

  // Runs `item` as planned for this process (PlanClusterItem) on the group
  // of `key` with `tag`, each operation bounded by `budget` (so is a first
  // call's wait for the others' rendezvous entries, and each connection).
  // `what` names the call in error messages ("item 0, set 0,1, epoch 3,
  // generation 0, ticket 7"). On failure the group is aborted.
  // REQUIRES: plan.processes == key.processes.
  virtual absl::Status Run(CollectiveKind kind, const CollectiveItem& item,
                           const ClusterItemPlan& plan, const TransportGroupKey& key, uint32_t tag,
                           absl::Duration budget, absl::string_view what) = 0;

  // Every process of the group of `key` (connected first if needed)
  // contributes `block` -- the same size on every process, at most 4 KiB --
  // and receives every process's, in subset order, with `tag` (a tag the
  // transport keeps apart from Run's operations). Errors and abort on
  // failure as Run's; INVALID_ARGUMENT for an empty or oversized block.
  virtual absl::StatusOr<std::vector<std::string>> Exchange(const TransportGroupKey& key,
                                                            const std::string& block, uint32_t tag,
                                                            absl::Duration budget,
                                                            absl::string_view what) = 0;

  // Aborts the group of `key` (see the file comment).
  virtual void Abort(const TransportGroupKey& key) = 0;
  // Aborts every group of `set_key`'s `generation` in `epoch` that this
  // process holds or tried, whatever its subset.
  virtual void AbortGeneration(uint64_t epoch, const std::string& set_key, uint64_t generation) = 0;
  // Aborts every group of an epoch up to `through_epoch` (the last one the
  // lost process was a member in) whose subset holds `process`; an
  // operation in flight on one fails UNAVAILABLE with `why` (the cluster's
  // words: "process 2 is lost (missed its heartbeats ...)"). A group still
  // in its rendezvous fails too, UNAVAILABLE with `why`, once its wait on
  // the store next looks (AbortableRendezvousStore) rather than at its
  // budget: the lost process may never publish. Groups of later epochs
  // hold a later incarnation of the process (it rejoined) and stay.
  virtual void AbortProcess(int32_t process, uint64_t through_epoch, const std::string& why) = 0;
  // Whether the group of `key` is connected here.
  virtual bool Connected(const TransportGroupKey& key) const = 0;
  // Frees the groups (and refusals) of epochs before `epoch`, but those of
  // the generations `kept` names (keys with an empty subset: the cluster
  // engine's formations, which outlive their epoch); calls that hold one
  // keep it until they return.
  virtual void DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept) = 0;
  // Connected groups held (tests, metrics).
  virtual size_t connected_groups() const = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_CROSS_PROCESS_TRANSPORT_H_
