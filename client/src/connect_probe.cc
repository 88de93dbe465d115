#include "client/src/connect_probe.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace placement::client {
namespace {

// Connects `fd` to `address` within `timeout`: true when it connected.
bool ConnectWithin(int fd, const sockaddr* address, socklen_t length, absl::Duration timeout) {
  if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) return false;
  if (connect(fd, address, length) == 0) return true;
  if (errno != EINPROGRESS) return false;
  pollfd polled{fd, POLLOUT, 0};
  const int ms = static_cast<int>(absl::ToInt64Milliseconds(timeout));
  if (poll(&polled, 1, ms > 0 ? ms : 1) != 1) return false;
  int error = 0;
  socklen_t size = sizeof(error);
  return getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
}

bool ConnectsToUnixSocket(absl::string_view path, absl::Duration timeout) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(address.sun_path)) return false;
  std::memcpy(address.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return false;
  const bool connected =
      ConnectWithin(fd, reinterpret_cast<const sockaddr*>(&address), sizeof(address), timeout);
  close(fd);
  return connected;
}

bool ConnectsToHostPort(absl::string_view target, absl::Duration timeout) {
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return false;
  absl::string_view host = target.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(target.substr(colon + 1), &port) || port <= 0 || port > 65535) {
    return false;
  }
  if (absl::StartsWith(host, "[") && absl::EndsWith(host, "]")) {
    host = host.substr(1, host.size() - 2);
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(std::string(host).c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
    return false;
  }
  bool connected = false;
  const int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
  if (fd >= 0) {
    connected = ConnectWithin(fd, found->ai_addr, found->ai_addrlen, timeout);
    close(fd);
  }
  freeaddrinfo(found);
  return connected;
}

}  // namespace

bool NothingListens(const std::string& target, absl::Duration timeout) {
  absl::string_view rest = target;
  if (absl::ConsumePrefix(&rest, "unix:")) {
    absl::ConsumePrefix(&rest, "//");
    return !ConnectsToUnixSocket(rest, timeout);
  }
  for (absl::string_view scheme : {"dns:///", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&rest, scheme)) break;
  }
  return !ConnectsToHostPort(rest, timeout);
}

}  // namespace placement::client
