// ClusterDaemons: N real placementd processes forming one cluster on
// loopback, for benchmarks (tests use tests/testing/cluster_processes.h,
// which needs gtest). Process 0 is the coordinator on a port picked for it;
// every daemon has its own public port and peer port, CPU devices, and a
// ready file whose `peer=HOST:PORT` line gives its peer address.
//
// The daemons are children of this process (SIGKILLed if it dies) and are
// stopped with SIGTERM by the destructor. Start() forks: call it before
// this process creates any gRPC object.
//
// Not thread-safe.
#ifndef PLACEMENT_BENCH_CLUSTER_DAEMONS_H_
#define PLACEMENT_BENCH_CLUSTER_DAEMONS_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace placement::bench {

struct ClusterDaemonsOptions {
  // The placementd binary; empty: $PLACEMENTD_BIN, else `placementd` next to
  // this executable (build/bin).
  std::string placementd;
  int num_processes = 2;
  int devices_per_process = 1;
  int64_t device_memory = int64_t{1} << 30;  // per device
  // Every daemon on its own, in no cluster (a baseline: what starting N
  // processes costs without forming anything).
  bool lone = false;
  // Appended to every daemon's flags (e.g. "--cluster_op_timeout=2m").
  std::vector<std::string> extra_flags;
  absl::Duration start_timeout = absl::Seconds(60);
};

class ClusterDaemons {
 public:
  // Starts every daemon and waits until all are ready (the cluster formed).
  // The status carries the stderr of a daemon that failed to start.
  static absl::StatusOr<std::unique_ptr<ClusterDaemons>> Start(
      const ClusterDaemonsOptions& options);
  ~ClusterDaemons();
  ClusterDaemons(const ClusterDaemons&) = delete;
  ClusterDaemons& operator=(const ClusterDaemons&) = delete;

  int size() const { return static_cast<int>(daemons_.size()); }
  // Daemon i's public gRPC address ("127.0.0.1:PORT").
  const std::string& address(int i) const { return daemons_[i].address; }
  // Daemon i's peer address (process 0's is the coordinator's).
  const std::string& peer_address(int i) const { return daemons_[i].peer_address; }
  pid_t pid(int i) const { return daemons_[i].pid; }
  // Everything daemon i wrote to stderr so far.
  std::string Stderr(int i) const;

 private:
  struct Daemon {
    pid_t pid = -1;
    std::string ready_path;
    std::string stderr_path;
    std::string address;
    std::string peer_address;
  };
  ClusterDaemons() = default;

  std::string dir_;
  std::vector<Daemon> daemons_;
};

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_CLUSTER_DAEMONS_H_
