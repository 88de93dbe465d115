#include "server/listen_address.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace placement::server {

std::string ListenAddress::ToGrpcUri(int actual_port) const {
  if (is_unix) return absl::StrCat("unix:", path);
  int p = port == 0 ? actual_port : port;
  if (absl::StrContains(host, ':')) return absl::StrCat("[", host, "]:", p);
  return absl::StrCat(host, ":", p);
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view value) {
  ListenAddress out;
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("--listen='", value, "' is invalid: ", why,
                                                   " (expected host:port or unix:/path)"));
  };
  if (absl::StartsWith(value, "unix:")) {
    out.is_unix = true;
    out.path = std::string(value.substr(5));
    if (out.path.empty() || out.path[0] != '/') return bad("the unix socket path must be absolute");
    return out;
  }
  absl::string_view host;
  absl::string_view port;
  if (absl::StartsWith(value, "[")) {
    size_t close = value.find(']');
    if (close == absl::string_view::npos) return bad("missing ']' after the IPv6 address");
    host = value.substr(1, close - 1);
    absl::string_view rest = value.substr(close + 1);
    if (!absl::StartsWith(rest, ":")) return bad("missing ':port' after the IPv6 address");
    port = rest.substr(1);
  } else {
    size_t colon = value.rfind(':');
    if (colon == absl::string_view::npos) return bad("missing ':port'");
    host = value.substr(0, colon);
    port = value.substr(colon + 1);
    if (absl::StrContains(host, ':')) return bad("IPv6 addresses must be written [addr]:port");
  }
  if (host.empty()) return bad("empty host");
  int port_number = 0;
  if (port.empty() || !absl::SimpleAtoi(port, &port_number)) return bad("the port is not a number");
  if (port_number < 0 || port_number > 65535) return bad("the port must be in [0, 65535]");
  out.host = std::string(host);
  out.port = port_number;
  return out;
}

}  // namespace placement::server
