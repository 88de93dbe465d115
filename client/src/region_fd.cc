#include "client/src/region_fd.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/scm_rights.h"

namespace placement::client {

absl::StatusOr<int> CreateSealedMemfd(const std::string& name, int64_t size_bytes) {
  int fd = memfd_create(name.empty() ? "placement-region" : name.c_str(),
                        MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("memfd_create: ", std::strerror(errno)));
  }
  if (ftruncate(fd, size_bytes) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot size and seal a ", size_bytes, "-byte memfd: ", std::strerror(error)));
  }
  return fd;
}

namespace {

// A connected stream socket to the region socket `address` ("/path" or
// "@abstract") with a 10 s receive timeout. UNAVAILABLE when it cannot be
// reached.
absl::StatusOr<int> ConnectRegionSocket(const std::string& address) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (address.empty() || address.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad region socket address '", address, "'"));
  }
  socklen_t length;
  if (address[0] == '@') {
    std::memcpy(addr.sun_path + 1, address.data() + 1, address.size() - 1);
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  } else {
    std::memcpy(addr.sun_path, address.data(), address.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
  }
  int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (sock < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  if (connect(sock, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    const int error = errno;
    close(sock);
    return absl::UnavailableError(absl::StrCat("cannot reach the daemon's region socket ", address,
                                               ": ", std::strerror(error)));
  }
  timeval timeout{10, 0};
  setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return sock;
}

// Receives one message into `data` and appends the fds it carries.
ssize_t ReceiveWithFds(int sock, char* data, size_t size, std::vector<int>* fds) {
  iovec iov{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 253)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
  if (n <= 0) return n;
  for (int fd : ReceivedFds(msg)) fds->push_back(fd);
  return n;
}

}  // namespace

absl::StatusOr<std::vector<int>> RedeemViewToken(const std::string& address,
                                                 const std::string& token) {
  absl::StatusOr<int> sock = ConnectRegionSocket(address);
  if (!sock.ok()) return sock.status();
  std::vector<int> fds;
  const auto fail = [&](absl::Status status) {
    for (int fd : fds) close(fd);
    close(*sock);
    return status;
  };
  const std::string request = absl::StrCat("V", token, "\n");
  if (send(*sock, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return fail(absl::UnavailableError(
        absl::StrCat("cannot send the view token to ", address, ": ", std::strerror(errno))));
  }
  // The line ("OK <n>" or "ERR <reason>") arrives in one message, with the
  // first fds attached; further fds ride on one-byte messages.
  char line[512];
  const ssize_t n = ReceiveWithFds(*sock, line, sizeof(line), &fds);
  absl::string_view reply(line, n > 0 ? static_cast<size_t>(n) : 0);
  const size_t newline = reply.find('\n');
  if (newline == absl::string_view::npos) {
    return fail(absl::UnavailableError(
        absl::StrCat("the region socket ", address, " closed without answering the view token")));
  }
  reply = reply.substr(0, newline);
  if (absl::ConsumePrefix(&reply, "ERR ")) {
    return fail(absl::NotFoundError(absl::StrCat("region socket: ", reply)));
  }
  size_t expected = 0;
  if (!absl::ConsumePrefix(&reply, "OK ") || !absl::SimpleAtoi(reply, &expected)) {
    return fail(
        absl::InternalError(absl::StrCat("region socket: unexpected answer '", reply, "'")));
  }
  while (fds.size() < expected) {
    char byte;
    if (ReceiveWithFds(*sock, &byte, 1, &fds) <= 0) {
      return fail(absl::UnavailableError(absl::StrCat("the region socket ", address, " sent ",
                                                      fds.size(), " of ", expected, " fds")));
    }
  }
  if (fds.size() != expected) {
    return fail(absl::InternalError(
        absl::StrCat("region socket: expected ", expected, " fds, got ", fds.size())));
  }
  close(*sock);
  return fds;
}

absl::StatusOr<std::string> PassFd(const std::string& address, int fd) {
  absl::StatusOr<int> connected = ConnectRegionSocket(address);
  if (!connected.ok()) return connected.status();
  const int sock = *connected;
  char byte = 'R';
  iovec iov{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  AttachFds({&fd, 1}, &control, &msg);
  if (sendmsg(sock, &msg, MSG_NOSIGNAL) != 1) {
    const int error = errno;
    close(sock);
    return absl::UnavailableError(
        absl::StrCat("cannot pass the fd to ", address, ": ", std::strerror(error)));
  }
  std::string reply;
  char buffer[128];
  while (reply.find('\n') == std::string::npos && reply.size() < 512) {
    const ssize_t n = recv(sock, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    reply.append(buffer, static_cast<size_t>(n));
  }
  close(sock);
  const size_t newline = reply.find('\n');
  if (newline == std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat("the region socket ", address, " closed without answering"));
  }
  absl::string_view line = absl::string_view(reply).substr(0, newline);
  if (absl::ConsumePrefix(&line, "ERR ")) {
    return absl::FailedPreconditionError(absl::StrCat("region socket: ", line));
  }
  return std::string(line);
}

}  // namespace placement::client
