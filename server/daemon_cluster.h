// The daemon's cluster flags and the steps that turn them into a running
// member (docs/cluster.md): where the peer services listen, who the
// coordinator is, and joining once the servers are up.
//
// Addresses: --peer_listen is where the daemon-to-daemon services
// (ClusterService on process 0, PeerService everywhere) listen. Unset, it
// is process 0's --coordinator address; else --listen when that is not a
// loopback address (one port for everything); or, for daemons on one
// machine, --listen's loopback host with a free port. --peer_advertise_address is
// what the others dial (default: the bound peer address; with a wildcard
// host, this machine's hostname). Gloo binds the advertised host.
#ifndef PLACEMENT_SERVER_DAEMON_CLUSTER_H_
#define PLACEMENT_SERVER_DAEMON_CLUSTER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/auth/transport_security.h"
#include "server/listen_address.h"

namespace placement::server {

struct DaemonClusterConfig {
  std::string coordinator;  // --coordinator host:port (process 0's peer address)
  int32_t num_processes = 1;
  std::string peer_listen;
  std::string peer_advertise_address;
  absl::Duration init_timeout = absl::Seconds(300);
  absl::Duration heartbeat_interval = absl::Seconds(10);
  int32_t heartbeat_misses = 10;
  absl::Duration op_timeout = absl::Seconds(60);
  bool check_collectives = false;
  // The cross-process transport by registered name; empty = the platform's.
  std::string transport;
  std::string peer_tls_server_name;
  std::string peer_token_file;

  bool enabled() const { return num_processes > 1 || !coordinator.empty(); }
};

// The cluster flags' values (declared in daemon_cluster_flags.cc).
DaemonClusterConfig DaemonClusterConfigFromFlags();

// INVALID_ARGUMENT naming the transports of this build when
// --cluster_transport names none of them (checked in and out of a
// cluster, so that a typo never waits for the cluster to show).
absl::Status CheckClusterTransport(const DaemonClusterConfig& config);

// Where the peer services listen, and whether that is the public server.
struct PeerListen {
  std::string address;  // host:port (port may be 0)
  bool shared = false;  // the same server as --listen
};

// Checks the cluster flags against --listen and --process_index and picks
// the peer listen address. INVALID_ARGUMENT naming the flag: num_processes
// < 1, process_index outside [0, num_processes), no --coordinator for a
// process other than 0, a unix --listen without --peer_listen, heartbeat
// settings out of range.
absl::StatusOr<PeerListen> ResolvePeerListen(const DaemonClusterConfig& config,
                                             int32_t process_index, const std::string& listen_flag,
                                             const ListenAddress& listen);

// What other daemons dial: --peer_advertise_address, else `bound` with a
// wildcard host replaced by this machine's hostname.
std::string AdvertisedPeerAddress(const DaemonClusterConfig& config, const ListenAddress& peer,
                                  int bound_port);

// The host part of host:port ("[::1]:7" -> "::1").
std::string HostOf(const std::string& address);

// `status` (a failed join) with what to check when the coordinator could not
// be reached over TLS. A handshake the coordinator refuses reaches the joining
// daemon only as a transport error -- under TLS 1.3 a client learns that its
// certificate was rejected after its side of the handshake is done, so gRPC
// says just "Socket closed" -- which does not say which certificate or CA
// is wrong. Other errors, and plaintext, are returned as they are.
absl::Status ExplainJoinFailure(absl::Status status, const TransportSecurityConfig& transport);

// The trimmed contents of --peer_token_file ("" when unset); NOT_FOUND when
// it cannot be read.
absl::StatusOr<std::string> ReadPeerToken(const std::string& path);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_CLUSTER_H_
