#include "server/region/listening_unix_socket.h"

#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

// Fills `addr` for a path or "@abstract" address; returns the length to pass
// to bind/connect, or 0 when the address does not fit.
socklen_t MakeAddress(const std::string& address, sockaddr_un* addr) {
  *addr = sockaddr_un{};
  addr->sun_family = AF_UNIX;
  if (address.size() >= sizeof(addr->sun_path)) return 0;
  if (address[0] == '@') {
    // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
    std::memcpy(addr->sun_path + 1, address.data() + 1, address.size() - 1);
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  }
  std::memcpy(addr->sun_path, address.data(), address.size());
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
}

absl::Status Fail(int fd, const std::string& what) {
  const int error = errno;
  close(fd);
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(error)));
}

}  // namespace

absl::StatusOr<int> ListenUnixSocket(const std::string& address, const SocketAccess& access) {
  sockaddr_un addr;
  if (address.empty() || address == "@") {
    return absl::InvalidArgumentError("region socket address is empty");
  }
  const socklen_t length = MakeAddress(address, &addr);
  if (length == 0) {
    return absl::InvalidArgumentError(absl::StrCat("region socket address '", address,
                                                   "' is longer than ", sizeof(addr.sun_path) - 1,
                                                   " bytes"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const bool path = address[0] != '@';
  if (path) {
    const int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), length) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("region socket ", address, " is in use by a running daemon"));
    }
    unlink(address.c_str());
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    return Fail(fd, absl::StrCat("cannot bind region socket ", address));
  }
  // Until listen() a connect is refused, so the access set here is the only
  // one a client ever meets.
  if (path) {
    if (access.group != kOwnGroup &&
        chown(address.c_str(), static_cast<uid_t>(-1), access.group) != 0) {
      unlink(address.c_str());
      return Fail(fd, absl::StrCat("cannot give region socket ", address, " group ", access.group));
    }
    if (chmod(address.c_str(), access.mode) != 0) {
      unlink(address.c_str());
      return Fail(fd, absl::StrCat("cannot set the mode of region socket ", address));
    }
  }
  if (listen(fd, 128) != 0) {
    if (path) unlink(address.c_str());
    return Fail(fd, absl::StrCat("cannot listen on region socket ", address));
  }
  return fd;
}

absl::StatusOr<gid_t> ParseGroup(const std::string& flag, const std::string& name) {
  uint32_t number = 0;
  if (absl::SimpleAtoi(name, &number)) return static_cast<gid_t>(number);
  std::vector<char> buffer(16384);
  group entry{};
  group* found = nullptr;
  if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", name.substr(0, 64), "': no such group on this host"));
  }
  return found->gr_gid;
}

}  // namespace placement::server
