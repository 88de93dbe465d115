// The cluster flags (docs/cluster.md), beside DaemonClusterConfig
// (daemon_cluster.h); only placementd links them.
#include "absl/flags/flag.h"
#include "absl/time/time.h"
#include "server/daemon_cluster.h"

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
          "waiting for their commit, the cross-process transport's (gloo, nccl) operations.");
ABSL_FLAG(bool, cluster_check_collectives, false,
          "Check every multi-controller collective before it runs: one small exchange between "
          "the daemons (about one network round trip per call) that turns calls issued in a "
          "different order or with different arguments into INVALID_ARGUMENT at once -- a "
          "debugging aid, as TORCH_DISTRIBUTED_DEBUG=DETAIL is for torch.distributed. false (the "
          "default, NCCL's and torch.distributed's rule: every trainer issues a set's calls in "
          "the same order with the same arguments): a call whose groups each span all of its "
          "daemons (e.g. an all-reduce over every mesh axis) runs alone, calls whose groups "
          "leave a daemon out are checked all the same, and calls that differ wait out "
          "--cluster_op_timeout and fail DEADLINE_EXCEEDED saying so");
ABSL_FLAG(std::string, cluster_transport, "",
          "What moves collectives' bytes between daemons, by name (--version lists the "
          "transports this build has): empty = the platform's choice (gloo); nccl = NCCL "
          "across daemons, experimental, GPU daemons only (docs/cluster.md).");
ABSL_FLAG(std::string, peer_tls_server_name, "",
          "The name checked in other daemons' certificates (default: the host dialled).");
ABSL_FLAG(std::string, peer_token_file, "",
          "File holding the bearer token this daemon presents to other daemons (their "
          "--auth_file maps it to role peer).");

namespace placement::server {

DaemonClusterConfig DaemonClusterConfigFromFlags() {
  DaemonClusterConfig config;
  config.coordinator = absl::GetFlag(FLAGS_coordinator);
  config.num_processes = absl::GetFlag(FLAGS_num_processes);
  config.peer_listen = absl::GetFlag(FLAGS_peer_listen);
  config.peer_advertise_address = absl::GetFlag(FLAGS_peer_advertise_address);
  config.init_timeout = absl::GetFlag(FLAGS_cluster_init_timeout);
  config.heartbeat_interval = absl::GetFlag(FLAGS_heartbeat_interval);
  config.heartbeat_misses = absl::GetFlag(FLAGS_heartbeat_misses);
  config.op_timeout = absl::GetFlag(FLAGS_cluster_op_timeout);
  config.check_collectives = absl::GetFlag(FLAGS_cluster_check_collectives);
  config.transport = absl::GetFlag(FLAGS_cluster_transport);
  config.peer_tls_server_name = absl::GetFlag(FLAGS_peer_tls_server_name);
  config.peer_token_file = absl::GetFlag(FLAGS_peer_token_file);
  return config;
}

}  // namespace placement::server
