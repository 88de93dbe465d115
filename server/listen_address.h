// Parsing and validation of --listen values: "host:port" (IPv4, hostname, or
// "[v6]:port"; port 0 picks a free one) or "unix:/absolute/path".
#ifndef PLACEMENT_SERVER_LISTEN_ADDRESS_H_
#define PLACEMENT_SERVER_LISTEN_ADDRESS_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace placement::server {

struct ListenAddress {
  bool is_unix = false;
  std::string host;  // without brackets
  int port = 0;
  std::string path;  // unix socket path

  // The gRPC URI for this address with `actual_port` substituted when the
  // configured port is 0.
  std::string ToGrpcUri(int actual_port) const;
};

// INVALID_ARGUMENT naming the flag value and what is wrong: missing port,
// port outside [0, 65535], non-numeric port, empty host, relative unix path.
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view value);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_LISTEN_ADDRESS_H_
