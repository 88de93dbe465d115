// Coordinator: the cluster's control plane, run by process 0's daemon
// (JAX's coordination service lives in process 0 the same way): membership
// with heartbeats, the key-value store, barriers and tickets. The gRPC
// front is server/service/cluster_handler.*; the mesh registry it serves is
// the daemon's own (server/cluster/cluster_meshes.h pushes it to peers).
//
// Owns a sweeper thread that marks silent members lost every half
// heartbeat interval; a loss fails the barriers that wait for that process.
// Waits (joins, barrier arrivals, key-value gets) hold no thread: they are
// callbacks bounded by one DeadlineTimer, so the number of processes that
// can wait at once is bounded only by memory.
// Single point of failure, as in JAX and torch's TCPStore: when process 0
// dies the others see the cluster fail and rejoin a restarted coordinator
// (docs/cluster.md).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_COORDINATOR_H_
#define PLACEMENT_SERVER_CLUSTER_COORDINATOR_H_

#include <memory>
#include <thread>

#include "absl/synchronization/notification.h"
#include "server/cluster/barrier_table.h"
#include "server/cluster/deadline_timer.h"
#include "server/cluster/kv_store.h"
#include "server/cluster/membership.h"

namespace placement::server {

class Coordinator {
 public:
  explicit Coordinator(MembershipOptions options);
  ~Coordinator();  // stops the sweeper

  // Fails every waiting Join, KeyValueGet and Barrier with UNAVAILABLE,
  // now and from now on.
  void Shutdown();

  Membership& membership() { return membership_; }
  KvStore& kv() { return kv_; }
  BarrierTable& barriers() { return barriers_; }

 private:
  // ~Coordinator stops it after Shutdown ended every wait, so no timeout
  // runs while the components below are destroyed.
  std::unique_ptr<DeadlineTimer> timer_;
  Membership membership_;
  KvStore kv_;
  BarrierTable barriers_;
  absl::Duration sweep_interval_;
  absl::Notification stop_;
  std::thread sweeper_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_COORDINATOR_H_
