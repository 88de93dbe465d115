// Cluster: one daemon's membership in a cluster of daemons (one per node),
// modelled on JAX's multi-controller runtime (jax.distributed.initialize):
// how it joins through the coordinator, what it knows of the others (a
// ClusterView, refreshed by heartbeats), how it reaches the coordinator
// (CoordinatorApi, made by the connector it is given once the coordinator's
// address is known) and who hears about membership changes.
//
// A daemon started without --num_processes/--coordinator has a disabled
// Cluster: process_index() is its --process_index, every device is local,
// nothing runs in the background.
//
// Lifecycle: construct, Join (blocks until the cluster formed), then
// StartHeartbeats. Heartbeats run every heartbeat_interval on a thread of
// their own (and at once when AwaitEpoch asks); a newer epoch in the answer replaces the view and
// calls the listeners. Failure handling:
//   - the coordinator says this daemon is no longer a member: the daemon
//     joins again with the same instance id. If the same coordinator
//     answers (it declared this daemon lost, e.g. after a partition),
//     listeners hear `self_lost` before the new view; if a new one does
//     (process 0 restarted: another coordinator_instance_id), they hear
//     only the new view, whose epoch is above every epoch of the old
//     coordinator (Membership), and this daemon's tensors stay;
//   - the coordinator does not answer heartbeat_misses beats in a row: the
//     view's state becomes kFailed with process 0 lost (listeners hear
//     `coordinator_lost`; tensors with shards on process 0 go) and
//     the daemon keeps trying to join until a coordinator answers (a
//     restarted process 0 re-forms the cluster);
// Device ids are fixed by the first formation; a later formation that would
// move this daemon's ids is refused (logged; the view stays kFailed).
//
// In-flight calls to a peer register a CallGuard with how to cancel them;
// when membership loses that peer, its calls are cancelled at once, so they
// end within the detection bound (heartbeat_interval * heartbeat_misses)
// instead of their own deadlines.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "server/cluster/cluster_view.h"
#include "server/cluster/coordinator_api.h"

namespace placement::server {

struct ClusterConfig {
  // host:port of the coordinator's peer address (process 0's
  // --peer_listen); empty with num_processes == 1: a lone daemon.
  std::string coordinator;
  int32_t process_index = 0;
  int32_t num_processes = 1;
  // What other daemons dial to reach this one (the bound --peer_listen),
  // and the address Gloo listens on (its host).
  std::string peer_address;
  std::string gloo_hostname;
  absl::Duration init_timeout = absl::Seconds(300);
  absl::Duration heartbeat_interval = absl::Seconds(10);
  int32_t heartbeat_misses = 10;
  // Bound on one cross-daemon operation: multi-controller barriers, pending
  // tensors waiting for their commit, Gloo operations.
  absl::Duration op_timeout = absl::Seconds(60);
  // Multi-controller calls are checked alike on every process before they
  // run (ClusterEngineOptions::check_calls); off, only the calls that need
  // it are (a group that leaves a process of the set out).
  bool check_collectives = false;

  bool enabled() const { return num_processes > 1 || !coordinator.empty(); }
  absl::Duration detection_bound() const { return heartbeat_interval * heartbeat_misses; }
};

// What changed, for listeners.
struct ClusterEvent {
  std::shared_ptr<const ClusterView> before;
  std::shared_ptr<const ClusterView> after;
  std::vector<int32_t> lost;      // alive before, not alive after
  std::vector<int32_t> rejoined;  // joined again (a new instance) since before
  bool self_lost = false;         // the coordinator dropped this daemon
  bool coordinator_lost = false;  // the coordinator stopped answering
};

// UNAVAILABLE in the cluster's words for a process `view` does not count
// alive: "process 2 (10.0.0.3:7000) is lost (missed its heartbeats: killed,
// crashed or cut off; epoch 5)", or "... left the cluster (drained; epoch 5)".
absl::Status ProcessGoneError(const ClusterView& view, int32_t process);

class Cluster {
 public:
  // Makes the client of the coordinator at `address` (host:port).
  using CoordinatorConnector =
      std::function<std::unique_ptr<CoordinatorApi>(const std::string& address)>;

  // `connect` is called once, by SetAddresses; a lone daemon needs none.
  Cluster(ClusterConfig config, CoordinatorConnector connect);
  ~Cluster();  // stops heartbeats (does not leave; see Leave)

  const ClusterConfig& config() const { return config_; }
  bool enabled() const { return config_.enabled(); }
  int32_t process_index() const { return config_.process_index; }
  int32_t num_processes() const { return config_.num_processes; }

  // Where this daemon's peer services can be reached (known once its
  // servers are bound), Gloo's host, and the coordinator when the config
  // named none (process 0 coordinates through its own peer address).
  // REQUIRES: before Join, on one thread.
  void SetAddresses(std::string peer_address, std::string gloo_hostname);

  // Joins with `devices` (this daemon's, ids ignored) and waits for the
  // cluster to form, up to init_timeout. Returns the view: this daemon's
  // devices are view.processes[process_index()].devices with their global
  // ids. The coordinator's errors (Membership::Join), or UNAVAILABLE /
  // DEADLINE_EXCEEDED when it cannot be reached in time.
  absl::StatusOr<std::shared_ptr<const ClusterView>> Join(std::vector<DeviceDescription> devices,
                                                          std::string instance_id);
  // REQUIRES: Join succeeded. Listeners must be added before.
  void StartHeartbeats();
  // Stops the heartbeat thread (waiting for a beat or a rejoin in flight):
  // no listener runs after it returns. Idempotent; REQUIRES: not called
  // from a listener. What a daemon tearing its services down calls first.
  void StopHeartbeats();
  // Tells the coordinator this daemon is going (draining), best effort,
  // after stopping the heartbeats: the coordinator refuses a left member's
  // beats, and a beat answered so would make the daemon join again.
  void Leave();

  // Called (on the heartbeat thread, in order) after every change. REQUIRES:
  // added before StartHeartbeats.
  void AddListener(std::function<void(const ClusterEvent&)> listener);

  // The latest view (a lone daemon's has state kSingle and no processes).
  std::shared_ptr<const ClusterView> view() const;
  int64_t epoch() const { return view()->epoch; }
  // Waits until this daemon has taken in a view of `epoch` or later (its
  // listeners ran), asking the coordinator at once rather than at the next
  // beat, up to `deadline`; false when it has not by then (or is stopping).
  // For a peer's request stamped with a newer epoch than this daemon's view
  // (a rejoin or loss it has not heard of yet): deciding on the older view
  // would refuse a call the others run, and they would wait it out.
  // While the view is kFailed (the heartbeat thread is joining again: no
  // beat can be asked for) it only waits, up to one heartbeat_interval.
  bool AwaitEpoch(int64_t epoch, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_, beat_mu_);
  // The process owning a device (-1 when unknown); a lone daemon owns all.
  int32_t ProcessOf(int64_t device_id) const;
  bool IsLocalDevice(int64_t device_id) const { return ProcessOf(device_id) == process_index(); }
  // The alive processes other than this daemon, ascending.
  std::vector<int32_t> AlivePeers() const;
  // Distinct processes owning `device_ids`, ascending.
  std::vector<int32_t> ProcessesOf(absl::Span<const int64_t> device_ids) const;
  // OK when every listed process is alive; UNAVAILABLE naming the first one
  // that is not ("process 1 (10.0.0.2:7000) is lost (epoch 4)").
  absl::Status CheckAlive(absl::Span<const int32_t> processes) const;
  std::string PeerAddress(int32_t process_index) const;

  // REQUIRES: SetAddresses ran.
  CoordinatorApi* coordinator() { return coordinator_.get(); }

  // Registers a call to `process` for cancellation (`cancel`, called from
  // the heartbeat thread, perhaps more than once) if the process is lost
  // while the call runs -- or at once, in the constructor, when the view
  // already says it is not alive (lost after the caller looked). Destroy
  // before what `cancel` touches.
  class CallGuard {
   public:
    CallGuard(Cluster* cluster, int32_t process, std::function<void()> cancel);
    ~CallGuard();
    CallGuard(const CallGuard&) = delete;
    CallGuard& operator=(const CallGuard&) = delete;

   private:
    friend class Cluster;
    Cluster* cluster_;
    int32_t process_;
    std::function<void()> cancel_;
  };

 private:
  void HeartbeatLoop();
  // Sleeps until the next beat is due, or asked for (AwaitEpoch: then
  // `*asked` is set, and a failed beat is not counted as a miss); false when
  // stopping.
  bool SleepUntilNextBeat(bool* asked) ABSL_LOCKS_EXCLUDED(beat_mu_);
  // Replaces the view and tells the listeners.
  void Publish(std::shared_ptr<const ClusterView> after, bool self_lost, bool coordinator_lost);
  // Joins again after the coordinator was lost and publishes the view
  // (after `self_lost` when the same coordinator declared this daemon lost
  // meanwhile: its join count for this daemon grew since `before`); true
  // when a member (false: stopping).
  bool Rejoin(const ClusterView& before);
  // Joins again (same instance, last_epoch = the view's), retrying until a
  // coordinator accepts with this daemon's device ids unchanged; nullopt
  // when stopping.
  std::optional<ClusterView> JoinAgain();
  void CancelCallsTo(int32_t process);

  ClusterConfig config_;  // addresses set once by SetAddresses
  CoordinatorConnector connect_;
  std::unique_ptr<CoordinatorApi> coordinator_;
  std::vector<std::function<void(const ClusterEvent&)>> listeners_;

  mutable absl::Mutex mu_;
  std::shared_ptr<const ClusterView> view_ ABSL_GUARDED_BY(mu_);
  // The heartbeat thread's wake-ups and AwaitEpoch's waits, apart from mu_:
  // a waiter with a condition makes every unlock of its mutex evaluate it,
  // and mu_ is taken on every call's path (view, ProcessOf, CheckAlive).
  mutable absl::Mutex beat_mu_ ABSL_ACQUIRED_AFTER(mu_);
  // The epoch of the last view whose listeners ran (AwaitEpoch).
  int64_t settled_epoch_ ABSL_GUARDED_BY(beat_mu_) = 0;
  bool beat_now_ ABSL_GUARDED_BY(beat_mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(beat_mu_) = false;
  std::vector<DeviceDescription> local_devices_ ABSL_GUARDED_BY(mu_);
  std::string instance_id_ ABSL_GUARDED_BY(mu_);
  // (first id, count) per process, fixed at the first formation.
  std::vector<std::pair<int64_t, int64_t>> ranges_ ABSL_GUARDED_BY(mu_);
  std::map<int32_t, std::set<CallGuard*>> calls_ ABSL_GUARDED_BY(mu_);

  absl::Notification stop_;
  // Serializes StopHeartbeats (a drain, then the destructor).
  absl::Mutex stop_mu_;
  std::thread heartbeats_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_H_
