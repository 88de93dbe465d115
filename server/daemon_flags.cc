// The daemon's own flags (addresses, drain, reflection, node identity) and
// DaemonConfigFromFlags, which asks every module for the flags it declares
// beside itself: platforms (server/platform/), TLS and authentication
// (auth/auth_flags.cc), tensor quotas (tensor/tensor_store_flags.cc), the
// memory reclaimer (device/reclaimer_flags.cc),
// streams (service/stream_flags.cc), sessions (session/session_flags.cc),
// regions (region/region_flags.cc), the cluster (daemon_cluster_flags.cc).
// Only placementd calls it, so only placementd links these flags.
#include <string>

#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "server/auth/auth_flags.h"
#include "server/daemon.h"
#include "server/device/reclaimer_flags.h"
#include "server/region/region_flags.h"
#include "server/service/stream_flags.h"
#include "server/session/session_flags.h"
#include "server/tensor/tensor_store_flags.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:50051",
          "Address to serve on: host:port (port 0 picks a free port) or unix:/absolute/path.");
ABSL_FLAG(std::string, ready_file, "",
          "Once serving, write the actual gRPC address to this file (line 1) and, with "
          "--metrics_listen, metrics=http(s)://HOST:PORT/metrics (line 2).");
ABSL_FLAG(std::string, metrics_listen, "",
          "host:port for Prometheus metrics (/metrics, /healthz): HTTP on loopback, HTTPS "
          "with the --tls_cert certificate elsewhere; empty disables.");
ABSL_FLAG(absl::Duration, drain_timeout, absl::Seconds(30),
          "On SIGTERM/SIGINT, how long in-flight calls may finish before being cancelled.");
ABSL_FLAG(int32_t, process_index, 0, "This node's index among the daemons of a job.");
ABSL_FLAG(bool, reflection, true, "Serve gRPC server reflection (unauthenticated, like health).");

namespace placement::server {

DaemonConfig DaemonConfigFromFlags() {
  DaemonConfig config;
  config.listen = absl::GetFlag(FLAGS_listen);
  config.ready_file = absl::GetFlag(FLAGS_ready_file);
  config.metrics_listen = absl::GetFlag(FLAGS_metrics_listen);
  config.drain_timeout = absl::GetFlag(FLAGS_drain_timeout);
  config.process_index = absl::GetFlag(FLAGS_process_index);
  config.reflection = absl::GetFlag(FLAGS_reflection);
  config.backend = BackendOptionsFromFlags();
  config.transport = TransportSecurityFromFlags();
  config.auth_file = AuthFileFromFlags();
  config.tensors = TensorStoreOptionsFromFlags();
  config.streams = StreamLimitsFromFlags();
  config.sessions = SessionOptionsFromFlags();
  config.regions = RegionSettingsFromFlags();
  config.reclaimer = ReclaimerOptionsFromFlags();
  config.cluster = DaemonClusterConfigFromFlags();
  return config;
}

}  // namespace placement::server
