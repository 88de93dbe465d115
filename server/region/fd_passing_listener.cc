#include "server/region/fd_passing_listener.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

// epoll data for the two fds that are not connections.
constexpr uint64_t kListenKey = ~uint64_t{0};
constexpr uint64_t kWakeKey = ~uint64_t{0} - 1;
constexpr char kDepositRequest = 'R';

void SendLine(int conn, const std::string& line) {
  // A line of at most a few hundred bytes always fits a fresh socket's
  // send buffer, so this never blocks.
  (void)send(conn, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdPassingListener>> FdPassingListener::Start(
    const std::string& address, FdPassingOptions options) {
  ASSIGN_OR_RETURN(const int fd, ListenUnixSocket(address, options.access));
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd < 0 || wake < 0) {
    const int error = errno;
    close(fd);
    if (epoll_fd >= 0) close(epoll_fd);
    if (wake >= 0) close(wake);
    if (address[0] != '@') unlink(address.c_str());
    return absl::InternalError(absl::StrCat("epoll/eventfd: ", std::strerror(error)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = kListenKey;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event);
  event.data.u64 = kWakeKey;
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake, &event);
  return std::unique_ptr<FdPassingListener>(
      new FdPassingListener(address, fd, epoll_fd, wake, options));
}

FdPassingListener::FdPassingListener(std::string address, int listen_fd, int epoll_fd, int wake_fd,
                                     FdPassingOptions options)
    : address_(std::move(address)),
      listen_fd_(listen_fd),
      epoll_fd_(epoll_fd),
      wake_fd_(wake_fd),
      options_(options),
      tokens_(options.tokens) {
  thread_ = std::thread([this] { Serve(); });
}

FdPassingListener::~FdPassingListener() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
  thread_.join();
  {
    absl::MutexLock lock(&mu_);
    for (auto& [conn, state] : connections_) close(conn);
    connections_.clear();
  }
  close(listen_fd_);
  close(epoll_fd_);
  close(wake_fd_);
  if (address_[0] != '@') unlink(address_.c_str());
}

int64_t FdPassingListener::connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(connections_.size());
}

absl::StatusOr<ClaimedFd> FdPassingListener::TakeFd(const std::string& token) {
  return tokens_.Take(token, address_);
}

void FdPassingListener::Serve() {
  std::vector<epoll_event> events(64);
  absl::Duration wait = absl::InfiniteDuration();
  while (true) {
    const int timeout_ms =
        wait == absl::InfiniteDuration()
            ? -1
            : static_cast<int>(std::max<int64_t>(1, absl::ToInt64Milliseconds(wait) + 1));
    const int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), timeout_ms);
    if (n < 0 && errno != EINTR) return;
    for (int i = 0; i < n; ++i) {
      const uint64_t key = events[i].data.u64;
      if (key == kWakeKey) return;
      if (key == kListenKey) {
        AcceptAll();
        continue;
      }
      const int conn = static_cast<int>(key);
      Connection state;
      {
        absl::MutexLock lock(&mu_);
        auto it = connections_.find(conn);
        if (it == connections_.end()) continue;
        state = it->second;
      }
      if (HandleReadable(conn, state)) {
        absl::MutexLock lock(&mu_);
        CloseConnection(conn);
      }
    }
    wait = ExpireConnections(absl::Now());
  }
}

std::string FdPassingListener::ConnectionRefusalLocked(const PeerProcess& peer) const {
  const auto count = [](const auto& map, auto key) {
    auto it = map.find(key);
    return it == map.end() ? int64_t{0} : it->second;
  };
  if (count(per_process_, peer.pid()) >= options_.max_connections_per_process) {
    return absl::StrCat(peer.Describe(), " already has ", options_.max_connections_per_process,
                        " connections open to the region socket");
  }
  if (count(per_uid_, peer.uid()) >= options_.max_connections_per_uid) {
    return absl::StrCat("uid ", peer.uid(), " already has ", options_.max_connections_per_uid,
                        " connections open to the region socket");
  }
  if (static_cast<int64_t>(connections_.size()) >= options_.max_connections) {
    return absl::StrCat("the region socket has ", options_.max_connections,
                        " connections open (its bound)");
  }
  return "";
}

void FdPassingListener::AcceptAll() {
  while (true) {
    const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: all accepted; EMFILE and the like: retried on the next event
    }
    absl::StatusOr<std::shared_ptr<PeerProcess>> peer = PeerProcess::OfSocket(conn);
    if (!peer.ok()) {
      SendLine(conn, absl::StrCat("ERR ", peer.status().message(), "\n"));
      close(conn);
      continue;
    }
    absl::MutexLock lock(&mu_);
    if (std::string refusal = ConnectionRefusalLocked(**peer); !refusal.empty()) {
      SendLine(conn, absl::StrCat("ERR ", refusal, "; try again later\n"));
      close(conn);
      continue;
    }
    ++per_process_[(*peer)->pid()];
    ++per_uid_[(*peer)->uid()];
    connections_[conn] = Connection{absl::Now() + options_.connection_timeout, *std::move(peer)};
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.u64 = static_cast<uint64_t>(conn);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn, &event);
  }
}

void FdPassingListener::CloseConnection(int conn) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  const PeerProcess& peer = *it->second.peer;
  if (--per_process_[peer.pid()] == 0) per_process_.erase(peer.pid());
  if (--per_uid_[peer.uid()] == 0) per_uid_.erase(peer.uid());
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn, nullptr);
  close(conn);
  connections_.erase(it);
}

absl::Duration FdPassingListener::ExpireConnections(absl::Time now) {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  std::vector<int> expired;
  for (const auto& [conn, state] : connections_) {
    if (state.deadline <= now) {
      expired.push_back(conn);
    } else {
      next = std::min(next, state.deadline);
    }
  }
  for (int conn : expired) {
    SendLine(conn, absl::StrCat("ERR nothing received within ",
                                absl::FormatDuration(options_.connection_timeout), "\n"));
    CloseConnection(conn);
  }
  return next == absl::InfiniteFuture() ? absl::InfiniteDuration() : next - now;
}

bool FdPassingListener::HandleReadable(int conn, const Connection& state) {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) return true;  // closed or broken
  // Every fd that arrived, however many; exactly one is accepted. (Fds past
  // the control buffer were discarded by the kernel: MSG_CTRUNC.)
  std::vector<int> received;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      received.push_back(fd);
    }
  }
  const auto refuse = [&](const std::string& reason) {
    for (int fd : received) close(fd);
    SendLine(conn, absl::StrCat("ERR ", reason, "\n"));
    return true;
  };
  if (byte != kDepositRequest) {
    return refuse(absl::StrCat("unknown request byte ", static_cast<int>(byte),
                               "; send 'R' with one fd (SCM_RIGHTS)"));
  }
  if (received.size() != 1 || (msg.msg_flags & MSG_CTRUNC) != 0) {
    return refuse(absl::StrCat(
        "expected exactly one fd (SCM_RIGHTS), got ",
        (msg.msg_flags & MSG_CTRUNC) != 0 ? "more than 4" : absl::StrCat(received.size())));
  }
  absl::StatusOr<std::string> token = tokens_.Deposit(received[0], state.peer);
  SendLine(conn, token.ok() ? absl::StrCat(*token, "\n")
                            : absl::StrCat("ERR ", token.status().message(), "\n"));
  return true;
}

}  // namespace placement::server
