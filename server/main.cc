// placementd: flags -> DaemonConfig -> Daemon; signals; exit codes.
//
// Exit codes: 0 after a clean drain, 1 when the daemon cannot start (address
// in use, backend unusable), 2 for invalid flags.
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/time/time.h"
#include "server/command_line.h"
#include "server/daemon.h"
#include "server/logging.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on: host:port (port 0 picks a free port) or unix:/absolute/path.");
ABSL_FLAG(std::string, ready_file, "",
          "Once serving, write the actual gRPC address to this file (line 1) and, with "
          "--metrics_listen, metrics=http(s)://HOST:PORT/metrics (line 2).");
ABSL_FLAG(std::string, backend, "auto",
          "Device backend: auto (CUDA when a driver and GPUs are present, else CPU), cpu or cuda.");
ABSL_FLAG(int32_t, cpu_devices, 8, "Number of CPU virtual devices (CPU backend).");
ABSL_FLAG(int64_t, cpu_device_memory, 0,
          "Byte budget of each CPU virtual device; 0 = half of physical memory split evenly.");
ABSL_FLAG(double, cuda_memory_fraction, 0.9,
          "Fraction of each GPU's free memory at start the daemon may allocate.");
ABSL_FLAG(int32_t, cuda_logical_devices, 1,
          "Devices each GPU is presented as (logical GPUs sharing it; collectives among them "
          "run host-staged).");
ABSL_FLAG(int64_t, cuda_device_memory, 0,
          "Byte budget of each GPU device; 0 = --cuda_memory_fraction of the GPU's free memory "
          "split evenly among its logical devices.");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for Prometheus metrics (/metrics, /healthz): HTTP on loopback, HTTPS "
          "with the --tls_cert certificate elsewhere; empty disables.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "On SIGTERM/SIGINT, how long in-flight calls may finish before being cancelled.");
ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");
ABSL_FLAG(int32_t, process_index, 0, "This node's index among the daemons of a job.");
ABSL_FLAG(int64_t, max_tensor_bytes_per_owner, 0,
          "Quota of tensor bytes per owner (client-chosen owner string); 0 = unlimited.");

ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain for TLS on the gRPC port (with --tls_key). Re-read when the "
          "file changes (every --tls_refresh_interval).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA bundle: require and verify client certificates (mutual TLS).");
ABSL_FLAG(absl::Duration, tls_refresh_interval, absl::Seconds(60),
          "How often the TLS files are checked for changes.");
ABSL_FLAG(bool, allow_insecure, false,
          "Allow plaintext gRPC (and metrics HTTP) on a non-loopback address; logs a warning.");
ABSL_FLAG(std::string, auth_file, "",
          "Credentials file mapping bearer-token digests and client-certificate names to "
          "tenants and roles (docs/security.md). Set = every call must authenticate. Re-read on "
          "change and on SIGHUP.");
ABSL_FLAG(int64_t, tenant_max_device_bytes, 0,
          "Quota of device bytes per tenant, each shard buffer rounded up to 4 KiB; 0 = "
          "unlimited.");
ABSL_FLAG(int64_t, tenant_max_tensors, 0, "Quota of tensors per tenant; 0 = unlimited.");
ABSL_FLAG(int64_t, max_streams, 1024,
          "Streams (uploads, downloads, prefetch) open at once, in total; 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_streams, 0, "Streams open at once per tenant; 0 = unlimited.");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "An upload or download that makes no progress this long is cancelled and frees what it "
          "reserved.");
ABSL_FLAG(absl::Duration, session_sweep_interval, absl::Seconds(1),
          "How often sessions whose lease expired are ended and their tensors freed.");
ABSL_FLAG(std::string, region_socket, "auto",
          "Unix socket through which same-host clients pass shared-memory fds for regions "
          "(docs/api/regions.md): a path, '@name' for an abstract socket, 'auto' (LISTEN_PATH"
          ".regions with a unix --listen, else an abstract socket named after the instance), or "
          "'' to turn fd passing off.");
ABSL_FLAG(bool, allow_shm_regions, false,
          "Also accept POSIX shm names for regions (they cannot be sealed: a client that shrinks "
          "one can crash the daemon; only for trusted clients).");
ABSL_FLAG(int64_t, max_regions, 1024, "Shared-memory regions registered at once; 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_regions, 0,
          "Shared-memory regions one tenant may have registered at once; 0 = unlimited.");
ABSL_FLAG(bool, reflection, true, "Serve gRPC server reflection (unauthenticated, like health).");

// Cluster (docs/cluster.md).
ABSL_FLAG(std::string, coordinator, "",
          "host:port of the cluster's coordinator: process 0's peer address (--peer_listen). "
          "Required for every process but 0; process 0 listens on it when --peer_listen is "
          "unset.");
ABSL_FLAG(int32_t, num_processes, 1,
          "Daemons (one per node) in the cluster; 1 with no --coordinator = a lone daemon.");
ABSL_FLAG(std::string, peer_listen, "",
          "host:port for the daemon-to-daemon services. Default: process 0's --coordinator; "
          "else --listen when it is not loopback; else --listen's loopback host, port 0.");
ABSL_FLAG(std::string, peer_advertise_address, "",
          "host:port other daemons dial to reach this one (default: the bound --peer_listen, a "
          "wildcard host replaced by the hostname). Gloo binds its host.");
ABSL_FLAG(absl::Duration, cluster_init_timeout, absl::Seconds(300),
          "How long to wait for every process to join; then exit non-zero.");
ABSL_FLAG(absl::Duration, heartbeat_interval, absl::Seconds(10),
          "How often each daemon tells the coordinator it is alive.");
ABSL_FLAG(int32_t, heartbeat_misses, 10,
          "Missed heartbeats in a row after which a process counts as lost.");
ABSL_FLAG(absl::Duration, cluster_op_timeout, absl::Seconds(60),
          "Bound on one cross-daemon operation: multi-controller barriers, prepared shards "
          "waiting for their commit, Gloo operations.");
ABSL_FLAG(std::string, peer_tls_server_name, "",
          "The name checked in other daemons' certificates (default: the host dialled).");
ABSL_FLAG(std::string, peer_token_file, "",
          "File holding the bearer token this daemon presents to other daemons (their "
          "--auth_file maps it to role peer).");

int main(int argc, char** argv) {
  using namespace placement::server;  // NOLINT(build/namespaces): main only
  const std::string usage =
      "placementd: serves this machine's accelerators over gRPC.\n"
      "  placementd --listen=127.0.0.1:50051 [--backend=auto|cpu|cuda] [--flagfile=FILE]";
  if (auto code = HandleHelpOrVersion(argc, argv, usage, std::cout)) return *code;
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);

  auto level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  if (!level.ok()) {
    std::fprintf(stderr, "placementd: %s\n", std::string(level.status().message()).c_str());
    return 2;
  }
  SetLogLevel(*level);

  DaemonConfig config;
  config.listen = absl::GetFlag(FLAGS_listen);
  config.ready_file = absl::GetFlag(FLAGS_ready_file);
  config.backend.kind = absl::GetFlag(FLAGS_backend);
  config.backend.cpu.num_devices = absl::GetFlag(FLAGS_cpu_devices);
  config.backend.cpu.device_memory_bytes = absl::GetFlag(FLAGS_cpu_device_memory);
  config.backend.cuda.memory_fraction = absl::GetFlag(FLAGS_cuda_memory_fraction);
  config.backend.cuda.logical_devices = absl::GetFlag(FLAGS_cuda_logical_devices);
  config.backend.cuda.device_memory_bytes = absl::GetFlag(FLAGS_cuda_device_memory);
  config.process_index = absl::GetFlag(FLAGS_process_index);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  config.max_tensor_bytes_per_owner = absl::GetFlag(FLAGS_max_tensor_bytes_per_owner);
  config.transport.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  config.transport.tls_key = absl::GetFlag(FLAGS_tls_key);
  config.transport.tls_client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  config.transport.refresh_interval = absl::GetFlag(FLAGS_tls_refresh_interval);
  config.transport.allow_insecure = absl::GetFlag(FLAGS_allow_insecure);
  config.auth_file = absl::GetFlag(FLAGS_auth_file);
  config.reflection = absl::GetFlag(FLAGS_reflection);
  config.tenant_max_device_bytes = absl::GetFlag(FLAGS_tenant_max_device_bytes);
  config.tenant_max_tensors = absl::GetFlag(FLAGS_tenant_max_tensors);
  config.session_sweep_interval = absl::GetFlag(FLAGS_session_sweep_interval);
  config.max_streams = absl::GetFlag(FLAGS_max_streams);
  config.tenant_max_streams = absl::GetFlag(FLAGS_tenant_max_streams);
  config.stream_idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  config.region_socket = absl::GetFlag(FLAGS_region_socket);
  config.allow_shm_regions = absl::GetFlag(FLAGS_allow_shm_regions);
  config.max_regions = absl::GetFlag(FLAGS_max_regions);
  config.tenant_max_regions = absl::GetFlag(FLAGS_tenant_max_regions);
  config.cluster.coordinator = absl::GetFlag(FLAGS_coordinator);
  config.cluster.num_processes = absl::GetFlag(FLAGS_num_processes);
  config.cluster.peer_listen = absl::GetFlag(FLAGS_peer_listen);
  config.cluster.peer_advertise_address = absl::GetFlag(FLAGS_peer_advertise_address);
  config.cluster.init_timeout = absl::GetFlag(FLAGS_cluster_init_timeout);
  config.cluster.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  config.cluster.heartbeat_misses = absl::GetFlag(FLAGS_heartbeat_misses);
  config.cluster.op_timeout = absl::GetFlag(FLAGS_cluster_op_timeout);
  config.cluster.peer_tls_server_name = absl::GetFlag(FLAGS_peer_tls_server_name);
  config.cluster.peer_token_file = absl::GetFlag(FLAGS_peer_token_file);

  // Signals are taken synchronously by this thread; every thread the daemon
  // starts inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = Daemon::Start(config);
  if (!daemon.ok()) {
    LogError("cannot start: ", daemon.status().ToString());
    return daemon.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    LogInfo("received SIGHUP; reloading --auth_file");
    (*daemon)->Reload();
  }
  LogInfo("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT", "; draining");
  (*daemon)->Drain();
  daemon->reset();
  return 0;
}
