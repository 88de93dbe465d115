#include "server/region/fd_passing_listener.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

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

void SendLine(int conn, const std::string& line) {
  (void)send(conn, line.data(), line.size(), MSG_NOSIGNAL);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdPassingListener>> FdPassingListener::Start(
    const std::string& address, FdPassingOptions options) {
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
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  if (address[0] != '@') {
    // A stale socket file from a crashed daemon is replaced; a live one is not.
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool live = probe >= 0 && connect(probe, reinterpret_cast<sockaddr*>(&addr), length) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      close(fd);
      return absl::UnavailableError(
          absl::StrCat("region socket ", address, " is in use by a running daemon"));
    }
    unlink(address.c_str());
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0 || listen(fd, 64) != 0) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on region socket ", address, ": ", std::strerror(error)));
  }
  int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    close(fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<FdPassingListener>(new FdPassingListener(address, fd, wake, options));
}

FdPassingListener::FdPassingListener(std::string address, int listen_fd, int wake_fd,
                                     FdPassingOptions options)
    : address_(std::move(address)), listen_fd_(listen_fd), wake_fd_(wake_fd), options_(options) {
  thread_ = std::thread([this] { Serve(); });
}

FdPassingListener::~FdPassingListener() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
  thread_.join();
  close(listen_fd_);
  close(wake_fd_);
  if (address_[0] != '@') unlink(address_.c_str());
  absl::MutexLock lock(&mu_);
  for (auto& [token, pending] : pending_) close(pending.fd);
  pending_.clear();
}

void FdPassingListener::Serve() {
  while (true) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents != 0) return;
    int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    close(conn);
  }
}

void FdPassingListener::HandleConnection(int conn) {
  timeval timeout{1, 0};
  setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(conn, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  if (recvmsg(conn, &msg, MSG_CMSG_CLOEXEC) <= 0) return;
  // Every fd that arrived, however many; exactly one is accepted.
  std::vector<int> received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < n; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      received.push_back(fd);
    }
  }
  if (received.size() != 1 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : received) close(fd);
    SendLine(conn,
             absl::StrCat("ERR expected exactly one fd (SCM_RIGHTS), got ", received.size(), "\n"));
    return;
  }
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    SweepLocked(now);
    if (static_cast<int64_t>(pending_.size()) >= options_.max_pending) {
      // Drop the oldest unclaimed fd to make room.
      auto oldest = pending_.begin();
      for (auto it = pending_.begin(); it != pending_.end(); ++it) {
        if (it->second.expire < oldest->second.expire) oldest = it;
      }
      close(oldest->second.fd);
      pending_.erase(oldest);
    }
    token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                            absl::Uniform<uint64_t>(bitgen_));
    pending_[token] = Pending{received[0], now + options_.token_ttl};
  }
  SendLine(conn, token + "\n");
}

void FdPassingListener::SweepLocked(absl::Time now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expire <= now) {
      close(it->second.fd);
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<int> FdPassingListener::TakeFd(const std::string& token) {
  absl::MutexLock lock(&mu_);
  SweepLocked(absl::Now());
  auto it = pending_.find(token);
  if (it == pending_.end()) {
    return absl::NotFoundError(
        absl::StrCat("fd_token '", token.substr(0, 64),
                     "' is unknown, expired or already used; pass the fd again on ", address_));
  }
  const int fd = it->second.fd;
  pending_.erase(it);
  return fd;
}

int64_t FdPassingListener::pending() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(pending_.size());
}

}  // namespace placement::server
