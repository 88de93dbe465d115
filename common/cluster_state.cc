#include "common/cluster_state.h"

namespace placement {

absl::string_view ClusterStateName(ClusterState state) {
  switch (state) {
    case ClusterState::kSingle:
      return "single";
    case ClusterState::kForming:
      return "forming";
    case ClusterState::kFormed:
      return "formed";
    case ClusterState::kDegraded:
      return "degraded";
    case ClusterState::kFailed:
      return "failed";
    case ClusterState::kUnspecified:
      break;
  }
  return "unspecified";
}

absl::string_view ProcessStateName(ProcessState state) {
  switch (state) {
    case ProcessState::kJoining:
      return "joining";
    case ProcessState::kAlive:
      return "alive";
    case ProcessState::kLost:
      return "lost";
    case ProcessState::kLeft:
      return "left";
    case ProcessState::kUnspecified:
      break;
  }
  return "unspecified";
}

}  // namespace placement
