// Membership: the coordinator's record of which daemons form the cluster
// (XLA's coordination service, JAX's jax.distributed.initialize). Process 0's
// daemon owns the only instance.
//
// Formation: the cluster forms when every index in [0, num_processes) has
// joined; Join blocks until then (or its timeout). At formation the
// coordinator assigns dense global device ids in (process_index, local
// index) order and the epoch becomes 1.
//
// Liveness: every member heartbeats; Sweep marks a member whose last beat is
// older than heartbeat_interval * heartbeat_misses as lost. A member that
// leaves (Leave) is lost at once. Every change of any member's state or
// instance advances the epoch, and listeners hear of it.
//
// Joins that wait for formation hold no thread: each is a callback
// (AsyncWait), completed at formation, at its timeout (on the
// DeadlineTimer's thread) or at shutdown, so any number of processes can
// join.
//
// Epochs are monotonic across coordinator incarnations: every change takes
// the epoch past the highest `last_epoch` any joiner reported, so when
// process 0 restarts, the survivors that join the new coordinator get an
// epoch above everything they ran under the old one, and retire its tickets
// and transport groups (ClusterEngine::DropEpochsBefore) rather than meet a
// reused epoch number.
//
// Rejoin: a restarted daemon joins its old index again with a new instance
// id (the previous instance, if still marked alive, is replaced and counted
// lost first). It must bring the same number of devices: ids stay fixed.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_MEMBERSHIP_H_
#define PLACEMENT_SERVER_CLUSTER_MEMBERSHIP_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/cluster/async_wait.h"
#include "server/cluster/cluster_view.h"
#include "server/cluster/deadline_timer.h"

namespace placement::server {

struct MembershipOptions {
  int32_t num_processes = 1;
  std::string coordinator_instance_id;
  absl::Duration heartbeat_interval = absl::Seconds(10);
  int32_t heartbeat_misses = 10;
};

// What a daemon says about itself when it joins.
struct JoinInfo {
  int32_t process_index = 0;
  int32_t num_processes = 1;
  std::string instance_id;
  std::string peer_address;
  std::string gloo_hostname;
  std::vector<DeviceDescription> devices;  // ids ignored
  // The highest epoch the daemon has known (0: new). Epochs only grow past
  // it (below), also across coordinator restarts.
  int64_t last_epoch = 0;
};

class Membership {
 public:
  using JoinDone = AsyncWait<ClusterView>::Done;

  // REQUIRES: `timer` outlives the membership.
  Membership(MembershipOptions options, DeadlineTimer* timer);
  ~Membership();  // fails waiting joins with UNAVAILABLE

  // Registers `info`; `done` gets the view once the cluster has formed (at
  // once when it had), or the error.
  // INVALID_ARGUMENT: index out of range, num_processes different from the
  // coordinator's, no devices. ALREADY_EXISTS: a live member with another
  // instance holds the index and beat within the last interval.
  // FAILED_PRECONDITION: a rejoin with a different device count.
  // DEADLINE_EXCEEDED: not formed in time, naming the missing indices (the
  // caller stays registered; joining again continues the wait).
  // UNAVAILABLE at shutdown. `done` may run on this thread before Join
  // returns, on the thread of the join that formed the cluster, or on the
  // timer's.
  void Join(const JoinInfo& info, absl::Duration timeout, JoinDone done);
  // Join, waiting on this thread (tests, tools).
  absl::StatusOr<ClusterView> JoinBlocking(const JoinInfo& info, absl::Duration timeout);

  // Records a beat. NOT_FOUND when `instance_id` is not the current member
  // at `process_index` (it was lost and replaced, or never joined): the
  // daemon must join again.
  absl::StatusOr<ClusterView> Heartbeat(int32_t process_index, const std::string& instance_id);

  // The member leaves now (a draining daemon). Unknown instances are ignored.
  void Leave(int32_t process_index, const std::string& instance_id);

  // Marks members lost whose last beat is older than the allowed silence.
  void Sweep(absl::Time now);

  // Fails every waiting Join with UNAVAILABLE, now and from now on.
  void Shutdown();

  ClusterView View() const;
  int64_t epoch() const;

  // Called after every epoch change with the new view (outside the lock, in
  // the order of changes). REQUIRES: added before members join.
  void AddListener(std::function<void(const ClusterView&)> listener);

 private:
  // Advances the epoch and returns the view to announce. REQUIRES: mu_.
  ClusterView ChangedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  ClusterView ViewLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Announce(const ClusterView& view);
  // Registers `info` (the first half of Join): the views to announce, or
  // the refusal.
  absl::Status RegisterLocked(const JoinInfo& info, std::vector<ClusterView>& changes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // "2 of 65 processes have not joined (process_index 3, 9)".
  std::string MissingLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimedOut(const std::shared_ptr<AsyncWait<ClusterView>>& wait);

  struct Slot {
    ProcessRecord record;
    absl::Time last_beat = absl::InfinitePast();
    bool ever_joined = false;
  };

  const MembershipOptions options_;
  DeadlineTimer* const timer_;
  mutable absl::Mutex mu_;
  // Joins waiting for formation.
  std::vector<std::shared_ptr<AsyncWait<ClusterView>>> waiting_ ABSL_GUARDED_BY(mu_);
  std::vector<Slot> slots_ ABSL_GUARDED_BY(mu_);
  bool formed_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // The highest last_epoch a joiner reported.
  int64_t epoch_floor_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::function<void(const ClusterView&)>> listeners_;
  // Serialises announcements so listeners see epochs in order.
  absl::Mutex announce_mu_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_MEMBERSHIP_H_
