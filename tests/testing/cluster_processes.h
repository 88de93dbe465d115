// ClusterProcesses: N real placementd daemons forming one cluster for
// integration tests -- on loopback (each with its own ports) or, with
// `namespaces`, each inside its own network namespace (separate hosts joined
// by veth pairs, tests/testing/network_namespaces.h). Process 0 is the
// coordinator on a port picked for it; the others dial it.
//
// Short heartbeats (default 250 ms x 8) keep failure tests quick.
//
// Not thread-safe.
#ifndef PLACEMENT_TESTS_TESTING_CLUSTER_PROCESSES_H_
#define PLACEMENT_TESTS_TESTING_CLUSTER_PROCESSES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/client/client.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/network_namespaces.h"

namespace placement::testing {

struct ClusterOptions {
  int num_processes = 2;
  int devices_per_process = 4;
  int64_t device_memory = int64_t{64} << 20;
  absl::Duration heartbeat_interval = absl::Milliseconds(250);
  int heartbeat_misses = 8;
  // Every daemon gets these; per_process[i] only daemon i.
  std::vector<std::string> extra_flags;
  std::vector<std::vector<std::string>> per_process;
  // Environment variables ("NAME=value") every daemon gets on top of the
  // test's (e.g. GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).
  std::vector<std::string> environment;
  // Run each daemon in its own network namespace (NetworkNamespaces).
  bool namespaces = false;
  absl::Duration start_timeout = absl::Seconds(60);
};

class ClusterProcesses {
 public:
  // Starts every daemon and waits until all are ready (the cluster formed).
  static absl::StatusOr<std::unique_ptr<ClusterProcesses>> Start(const ClusterOptions& options);

  int size() const { return static_cast<int>(daemons_.size()); }
  DaemonProcess& daemon(int i) { return *daemons_[i]; }
  const std::string& address(int i) const { return daemons_[i]->address(); }
  const std::string& coordinator() const { return coordinator_; }
  absl::StatusOr<std::unique_ptr<client::Client>> Connect(int i) const;
  // With `options` (TLS, a token).
  absl::StatusOr<std::unique_ptr<client::Client>> Connect(
      int i, const client::ClientOptions& options) const;
  NetworkNamespaces* namespaces() { return namespaces_.get(); }

  // SIGKILLs daemon i.
  void Kill(int i);
  // Starts daemon i again with its flags and waits until it has joined.
  absl::Status Restart(int i);
  // The flags daemon i starts with.
  DaemonOptions OptionsFor(int i) const;

 private:
  ClusterProcesses() = default;
  // Launches every daemon with OptionsFor and waits until each is ready.
  absl::Status LaunchAll();

  ClusterOptions options_;
  std::unique_ptr<NetworkNamespaces> namespaces_;
  std::string coordinator_;
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

// A free TCP port on 127.0.0.1 (bound and released).
int PickFreePort();

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_CLUSTER_PROCESSES_H_
