#include "server/daemon_cluster.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/collective/transport/transport_registry.h"

namespace placement::server {

absl::Status CheckClusterTransport(const DaemonClusterConfig& config) {
  if (config.transport.empty()) return absl::OkStatus();
  const std::vector<std::string> names = TransportRegistry::Global().Names();
  if (std::find(names.begin(), names.end(), config.transport) != names.end()) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--cluster_transport='", config.transport, "' is not a transport of this build; it has: ",
      names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
}

absl::StatusOr<PeerListen> ResolvePeerListen(const DaemonClusterConfig& config,
                                             int32_t process_index, const std::string& listen_flag,
                                             const ListenAddress& listen) {
  if (config.num_processes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_processes must be >= 1, got ", config.num_processes));
  }
  if (process_index < 0 || process_index >= config.num_processes) {
    return absl::InvalidArgumentError(absl::StrCat("--process_index=", process_index,
                                                   " is outside [0, ", config.num_processes,
                                                   ") for --num_processes=", config.num_processes));
  }
  if (config.heartbeat_interval < absl::Milliseconds(10) || config.heartbeat_misses < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--heartbeat_interval must be at least 10ms and --heartbeat_misses at least 1, got ",
        absl::FormatDuration(config.heartbeat_interval), " and ", config.heartbeat_misses));
  }
  if (config.init_timeout <= absl::ZeroDuration() || config.op_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--cluster_init_timeout and --cluster_op_timeout must be positive");
  }
  if (process_index != 0 && config.coordinator.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--coordinator (process 0's peer address, host:port) is required for --process_index=",
        process_index, " of --num_processes=", config.num_processes));
  }
  PeerListen out;
  if (!config.peer_listen.empty()) {
    out.address = config.peer_listen;
  } else if (process_index == 0 && !config.coordinator.empty()) {
    // The coordinator's address is process 0's peer address.
    out.address = config.coordinator;
  } else if (!listen.is_unix && !IsLoopback(listen)) {
    out.address = listen_flag;
  } else if (!listen.is_unix) {
    out.address = absl::StrCat(listen.host.find(':') != std::string::npos
                                   ? absl::StrCat("[", listen.host, "]")
                                   : listen.host,
                               ":0");
  } else {
    return absl::InvalidArgumentError(
        "--peer_listen (host:port) is required with a unix --listen: other daemons reach this "
        "one over TCP");
  }
  ASSIGN_OR_RETURN(ListenAddress peer, ParseListenAddress(out.address));
  if (peer.is_unix) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer_listen=", out.address, " must be host:port, not a unix socket"));
  }
  out.shared = out.address == listen_flag;
  return out;
}

std::string HostOf(const std::string& address) {
  absl::string_view a = address;
  if (absl::ConsumePrefix(&a, "[")) {
    const size_t close = a.find(']');
    return std::string(a.substr(0, close));
  }
  const size_t colon = a.rfind(':');
  return std::string(colon == absl::string_view::npos ? a : a.substr(0, colon));
}

std::string AdvertisedPeerAddress(const DaemonClusterConfig& config, const ListenAddress& peer,
                                  int bound_port) {
  if (!config.peer_advertise_address.empty()) return config.peer_advertise_address;
  std::string host = peer.host;
  if (host.empty() || host == "0.0.0.0" || host == "::" || host == "[::]") {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  if (host.find(':') != std::string::npos) host = absl::StrCat("[", host, "]");
  return absl::StrCat(host, ":", bound_port);
}

absl::Status ExplainJoinFailure(absl::Status status, const TransportSecurityConfig& transport) {
  const bool transport_failure = (status.code() == absl::StatusCode::kUnavailable ||
                                  status.code() == absl::StatusCode::kDeadlineExceeded) &&
                                 absl::StrContains(status.message(), "coordinator at");
  if (!transport.tls() || !transport_failure) return status;
  return absl::Status(
      status.code(),
      absl::StrCat(status.message(),
                   ". If the coordinator is up, the TLS handshake between the daemons may be what "
                   "fails: this daemon's --tls_cert must be signed by a CA in the coordinator's "
                   "--tls_client_ca, and the coordinator's certificate by a CA in this daemon's "
                   "--tls_client_ca (else the system roots), naming the host dialled or "
                   "--peer_tls_server_name"));
}

absl::StatusOr<std::string> ReadPeerToken(const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream in(path);
  if (!in.good()) {
    return absl::NotFoundError(absl::StrCat("--peer_token_file='", path, "' cannot be read"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(text.str()));
}

}  // namespace placement::server
