// Whether anything listens at a gRPC target, asked with a plain connect.
//
// Client::Connect uses it when gRPC reports a failed connection: nothing
// listening (refused, unreachable, unresolvable, no such socket) fails the
// connect at once, while a listener whose connection failed (a TLS
// handshake, a one-off failure under load) gets gRPC's reconnection.
//
// A pure function of the network; thread-safe.
#ifndef PLACEMENT_CLIENT_SRC_CONNECT_PROBE_H_
#define PLACEMENT_CLIENT_SRC_CONNECT_PROBE_H_

#include <string>

#include "absl/time/time.h"

namespace placement::client {

// True when a plain connect to `target` (host:port, [v6]:port,
// dns:///host:port, ipv4:/ipv6:host:port, unix:path, unix:///path) fails
// within `timeout`. Targets of other forms count as failing (gRPC's
// failure stands).
bool NothingListens(const std::string& target, absl::Duration timeout);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CONNECT_PROBE_H_
