// Daemon: wires the configured components (backend, inventory, registries,
// handlers, health, reflection, metrics) into a running gRPC server, and
// drains it. main.cc only parses flags into DaemonConfig and calls this.
//
// Thread-safe: Drain() may be called from any thread, once or many times.
#ifndef PLACEMENT_SERVER_DAEMON_H_
#define PLACEMENT_SERVER_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/transport_security.h"
#include "server/daemon_cluster.h"
#include "server/device/memory_reclaimer.h"
#include "server/platform/platform_selection.h"
#include "server/region/region_flags.h"
#include "server/service/stream_registry.h"
#include "server/session/session_manager.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

struct DaemonConfig {
  // host:port (port 0 picks a free one) or unix:/absolute/path.
  std::string listen = "127.0.0.1:50051";
  // Once serving, the actual address is written here (atomically) as line 1;
  // with metrics on, line 2 is "metrics=http://HOST:PORT/metrics" (https://
  // when the metrics port is off loopback and the daemon has --tls_cert).
  // Checked before anything starts: a path that cannot be written fails
  // the start (FAILED_PRECONDITION naming it).
  std::string ready_file;
  // --backend and every platform's settings.
  BackendOptions backend;
  // This node's index among the daemons of a job (--process_index): the
  // daemon's identity, handed to whichever platform serves the devices.
  int32_t process_index = 0;
  // host:port for Prometheus text metrics over HTTP; empty disables.
  std::string metrics_listen;
  // How long in-flight calls may run after draining starts.
  absl::Duration drain_timeout = absl::Seconds(30);
  // Quotas of the tensor store (per owner, per tenant; 0 = unlimited).
  TensorStoreOptions tensors;
  // Stream bounds (server/service/stream_registry.h).
  StreamLimits streams;
  // Session leases and how often expired sessions are swept.
  SessionOptions sessions;
  // TLS / mutual TLS on the gRPC port, and when plaintext is allowed
  // (server/auth/transport_security.h).
  TransportSecurityConfig transport;
  // Credentials file (server/auth/credentials_file.h); empty = authentication
  // off, every caller is one implicit tenant.
  std::string auth_file;
  // Shared-memory regions (docs/api/regions.md): the fd-passing socket and
  // the registry's bounds.
  RegionSettings regions;
  // When cached device blocks and malloc's free pages go back to the system
  // (server/device/memory_reclaimer.h).
  ReclaimerOptions reclaimer;
  // Serve grpc.reflection (always unauthenticated, like health).
  bool reflection = true;
  // Cluster membership (server/daemon_cluster.h, docs/cluster.md).
  DaemonClusterConfig cluster;
};

// Every flag of placementd, each read by the module that declares it
// (server/daemon_flags.cc). REQUIRES: absl::ParseCommandLine ran.
DaemonConfig DaemonConfigFromFlags();

struct DaemonState;

class Daemon {
 public:
  // Creates the backend and starts serving. INVALID_ARGUMENT for bad config
  // (listen address, device counts); FAILED_PRECONDITION when the requested
  // backend is unusable; UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(const DaemonConfig& config);
  ~Daemon();

  // The address clients should dial ("127.0.0.1:41234", "unix:/run/x.sock").
  const std::string& address() const;
  int metrics_port() const;  // 0 when metrics are off
  const std::string& backend_note() const;

  // Re-reads what can change without a restart: the --auth_file (SIGHUP).
  // TLS files are watched by gRPC itself.
  void Reload();

  // Health NOT_SERVING, new calls UNAVAILABLE, waits for in-flight calls up
  // to drain_timeout, then stops the server (cancelling what remains).
  void Drain();

 private:
  explicit Daemon(std::unique_ptr<DaemonState> state);
  std::unique_ptr<DaemonState> state_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_H_
