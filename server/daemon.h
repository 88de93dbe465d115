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
#include "server/platform/platform_selection.h"

namespace placement::server {

struct DaemonConfig {
  // host:port (port 0 picks a free one) or unix:/absolute/path.
  std::string listen = "127.0.0.1:50051";
  // Once serving, the actual address is written here (atomically) as line 1;
  // with metrics on, line 2 is "metrics=http://HOST:PORT/metrics" (https://
  // when the metrics port is off loopback and the daemon has --tls_cert).
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
  // Per-owner quota on tensor bytes; 0 = unlimited.
  int64_t max_tensor_bytes_per_owner = 0;
  // Per-tenant quotas: page-rounded device bytes and tensor count; 0 =
  // unlimited.
  int64_t tenant_max_device_bytes = 0;
  int64_t tenant_max_tensors = 0;
  // Stream bounds (server/service/stream_registry.h).
  int64_t max_streams = 1024;
  int64_t tenant_max_streams = 0;
  absl::Duration stream_idle_timeout = absl::Seconds(60);
  // How often expired sessions are swept (their tensors freed).
  absl::Duration session_sweep_interval = absl::Seconds(1);
  // TLS / mutual TLS on the gRPC port, and when plaintext is allowed
  // (server/auth/transport_security.h).
  TransportSecurityConfig transport;
  // Credentials file (server/auth/credentials_file.h); empty = authentication
  // off, every caller is one implicit tenant.
  std::string auth_file;
  // Shared-memory regions (docs/api/regions.md): the fd-passing socket (a
  // path, "@abstract", "auto" = LISTEN_PATH.regions for a unix listen address,
  // else "@placementd-regions-INSTANCE"; "" = fd passing off), whether POSIX
  // shm names are accepted, and how many regions may be registered at once.
  std::string region_socket = "auto";
  bool allow_shm_regions = false;
  int64_t max_regions = 1024;
  int64_t tenant_max_regions = 0;  // 0 = unlimited
  // Serve grpc.reflection (always unauthenticated, like health).
  bool reflection = true;
  // Cluster membership (server/daemon_cluster.h, docs/cluster.md).
  DaemonClusterConfig cluster;
};

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
  struct State;
  explicit Daemon(std::unique_ptr<State> state);
  // Starts the peer server when it is not the public one, joins the
  // cluster (blocking up to --cluster_init_timeout), assigns the global
  // device ids and opens the gate. On error everything started is stopped.
  static absl::Status JoinCluster(State* state, const PeerListen& peer_listen,
                                  const ListenAddress& peer_bind, int public_port);
  std::unique_ptr<State> state_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_H_
