// The gRPC servers a daemon runs -- the public one (--listen) and, in a
// cluster, the peer one (--peer_listen) when it is another address -- with
// the settings both share: no SO_REUSEPORT (two daemons never share a
// port), keepalive pings from clients allowed, the malformed-request
// interceptor (and, on the public server, RPC metrics).
//
// Pure functions; thread-compatible.
#ifndef PLACEMENT_SERVER_DAEMON_SERVER_H_
#define PLACEMENT_SERVER_DAEMON_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "server/metrics/metrics.h"

namespace placement::server {

// A unix socket path that accepts connections belongs to a live server;
// gRPC would unlink it and steal the address: UNAVAILABLE then (and
// INVALID_ARGUMENT for a path longer than sun_path).
absl::Status CheckUnixSocketFree(const std::string& path);

// The channel arguments every daemon server uses.
void ApplyServerDefaults(grpc::ServerBuilder* builder);

// The interceptors of a daemon server: malformed requests always, RPC
// metrics when `metrics` is set.
void SetDaemonInterceptors(grpc::ServerBuilder* builder, Metrics* metrics);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DAEMON_SERVER_H_
