// ClusterView: what a daemon knows of its cluster at one moment -- every
// process (node daemon) with its state, peer address and devices, and the
// membership epoch. Views are immutable snapshots handed out as
// shared_ptr<const ClusterView>; a newer epoch means a newer view.
//
// Device ids are global and dense in (process_index, local index) order:
// process p's devices are [first_device_id, first_device_id + count). They
// are fixed once the cluster has formed (a process that rejoins must bring
// the same number of devices), so ProcessOf never changes afterwards.
//
// Plain value types; thread-compatible.
#ifndef PLACEMENT_SERVER_CLUSTER_CLUSTER_VIEW_H_
#define PLACEMENT_SERVER_CLUSTER_CLUSTER_VIEW_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "common/cluster_state.h"
#include "server/device/device_backend.h"

namespace placement::server {

// ProcessState, ClusterState and their names: common/cluster_state.h.
using placement::ClusterState;
using placement::ProcessState;

struct ProcessRecord {
  int32_t process_index = 0;
  ProcessState state = ProcessState::kJoining;
  std::string instance_id;
  std::string peer_address;   // host:port other daemons dial
  std::string gloo_hostname;  // the interface address Gloo binds
  // Global ids (first_device_id + local index) once the cluster formed.
  std::vector<DeviceDescription> devices;
  int64_t first_device_id = 0;
  int32_t joins = 0;
};

struct ClusterView {
  int32_t num_processes = 1;
  int64_t epoch = 0;
  ClusterState state = ClusterState::kSingle;
  std::vector<ProcessRecord> processes;  // by process index
  std::string coordinator_instance_id;

  // The process owning `device_id`, or -1.
  int32_t ProcessOf(int64_t device_id) const;
  bool IsAlive(int32_t process_index) const;
  // Every device of every process, in id order.
  std::vector<DeviceDescription> AllDevices() const;
  // "process 1 (10.0.0.2:7000)".
  std::string Describe(int32_t process_index) const;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_CLUSTER_VIEW_H_
