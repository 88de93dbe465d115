// The states of a cluster of daemons and of its processes (docs/cluster.md),
// shared by the daemon and the client library, with their names. Values are
// placement.v1.ClusterState's and ProcessState's.
#ifndef PLACEMENT_COMMON_CLUSTER_STATE_H_
#define PLACEMENT_COMMON_CLUSTER_STATE_H_

#include "absl/strings/string_view.h"

namespace placement {

enum class ClusterState {
  kUnspecified = 0,
  kSingle = 1,    // a lone daemon
  kForming = 2,   // waiting for every process to join
  kFormed = 3,    // every process alive
  kDegraded = 4,  // a process is lost
  kFailed = 5,    // the coordinator is unreachable
};

enum class ProcessState {
  kUnspecified = 0,
  kJoining = 1,  // expected, not joined yet
  kAlive = 2,
  kLost = 3,  // missed its heartbeats: killed, crashed or cut off
  kLeft = 4,  // said it was going (a draining daemon)
};

// "single", "forming", "formed", "degraded", "failed" ("unspecified").
absl::string_view ClusterStateName(ClusterState state);
// "joining", "alive", "lost", "left" ("unspecified").
absl::string_view ProcessStateName(ProcessState state);

}  // namespace placement

#endif  // PLACEMENT_COMMON_CLUSTER_STATE_H_
