#include "server/region/fd_passing_listener.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/scm_rights.h"
#include "common/status_macros.h"

namespace placement::server {
namespace {

// epoll data for the two fds that are not connections.
constexpr uint64_t kListenKey = ~uint64_t{0};
constexpr uint64_t kWakeKey = ~uint64_t{0} - 1;
constexpr char kDepositRequest = 'R';
constexpr char kViewRequest = 'V';
// "V", 32 hex digits, "\n", with room for a longer (refused) token.
constexpr size_t kMaxViewRequest = 72;

void SendLine(int conn, const std::string& line) {
  // A line of at most a few hundred bytes always fits a fresh socket's
  // send buffer, so this never blocks.
  (void)send(conn, line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Sends `data` with `fds` attached in one message; false when it failed.
bool SendWithFds(int conn, const std::string& data, const int* fds, size_t count) {
  iovec iov{const_cast<char*>(data.data()), data.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  AttachFds({fds, count}, &control, &msg);
  // A few small messages fit a fresh socket's send buffer: never blocks.
  return sendmsg(conn, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(data.size());
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
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
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
  if (spare_fd_ >= 0) close(spare_fd_);
  if (address_[0] != '@') unlink(address_.c_str());
}

int64_t FdPassingListener::connections() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(connections_.size());
}

void FdPassingListener::set_view_redeemer(ViewRedeemer redeemer) {
  absl::MutexLock lock(&mu_);
  redeemer_ = std::move(redeemer);
}

absl::StatusOr<std::shared_ptr<PeerProcess>> FdPassingListener::DepositorOf(
    const std::string& token) const {
  return tokens_.DepositorOf(token, address_);
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
    const absl::Time now = absl::Now();
    wait = std::min(ExpireConnections(now), tokens_.Sweep(now) - now);
  }
}

std::string FdPassingListener::ConnectionRefusalLocked(const PeerProcess& peer) const {
  const auto count = [](const auto& map, auto key) {
    auto it = map.find(key);
    return it == map.end() ? int64_t{0} : it->second;
  };
  if (peer.pid_known() && count(per_process_, peer.pid()) >= options_.max_connections_per_process) {
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
      if ((errno == EMFILE || errno == ENFILE) && RefuseWithSpareFd()) continue;
      return;  // EAGAIN: all accepted
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
    if ((*peer)->pid_known()) ++per_process_[(*peer)->pid()];
    ++per_uid_[(*peer)->uid()];
    connections_[conn] = Connection{absl::Now() + options_.connection_timeout, *std::move(peer)};
    epoll_event event{};
    event.events = EPOLLIN | EPOLLRDHUP;
    event.data.u64 = static_cast<uint64_t>(conn);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn, &event);
  }
}

bool FdPassingListener::RefuseWithSpareFd() {
  // Out of fds: the connection would stay queued, and the level-triggered
  // listening socket would wake the loop at once, again and again. The
  // spare fd makes room to accept it, tell it why and close it.
  if (spare_fd_ < 0) {
    // None to give (reopening failed): wait a little instead of spinning.
    absl::SleepFor(absl::Milliseconds(10));
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    return false;
  }
  close(spare_fd_);
  const int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn >= 0) {
    SendLine(conn, "ERR the daemon is out of file descriptors; try again later\n");
    close(conn);
  }
  spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return conn >= 0;
}

void FdPassingListener::CloseConnection(int conn) {
  auto it = connections_.find(conn);
  if (it == connections_.end()) return;
  const PeerProcess& peer = *it->second.peer;
  if (peer.pid_known() && --per_process_[peer.pid()] == 0) per_process_.erase(peer.pid());
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

void FdPassingListener::RedeemView(int conn, const std::string& token,
                                   const std::shared_ptr<PeerProcess>& peer) {
  ViewRedeemer redeemer;
  {
    absl::MutexLock lock(&mu_);
    redeemer = redeemer_;
  }
  if (!redeemer) {
    SendLine(conn, "ERR views are off on this daemon\n");
    return;
  }
  absl::StatusOr<std::vector<int>> fds = redeemer(token, peer);
  if (!fds.ok()) {
    SendLine(conn, absl::StrCat("ERR ", fds.status().message(), "\n"));
    return;
  }
  const size_t total = fds->size();
  size_t sent = std::min<size_t>(total, kMaxFdsPerMessage);
  bool ok = SendWithFds(conn, absl::StrCat("OK ", total, "\n"), fds->data(), sent);
  while (ok && sent < total) {
    const size_t n = std::min<size_t>(total - sent, kMaxFdsPerMessage);
    ok = SendWithFds(conn, "+", fds->data() + sent, n);
    sent += n;
  }
  // The reader holds its duplicates now (or, on a failed send, never will:
  // its export ends with Unexport or its exit).
  for (int fd : *fds) close(fd);
}

bool FdPassingListener::HandleReadable(int conn, const Connection& state) {
  char data[kMaxViewRequest];
  iovec iov{data, state.pending.empty() ? size_t{1} : kMaxViewRequest - state.pending.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = recvmsg(conn, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) return true;  // closed or broken
  const char byte = state.pending.empty() ? data[0] : state.pending[0];
  // Every fd that arrived, however many; exactly one is accepted. (Fds past
  // the control buffer were discarded by the kernel: MSG_CTRUNC.)
  const std::vector<int> received = ReceivedFds(msg);
  const auto refuse = [&](const std::string& reason) {
    for (int fd : received) close(fd);
    SendLine(conn, absl::StrCat("ERR ", reason, "\n"));
    return true;
  };
  if (byte == kViewRequest) {
    if (!received.empty()) return refuse("a view request carries no fds");
    // The request byte came alone (one-byte read); the token follows,
    // perhaps in pieces.
    std::string request = state.pending.empty() ? std::string(1, kViewRequest) : state.pending;
    if (!state.pending.empty()) request.append(data, static_cast<size_t>(n));
    const size_t newline = request.find('\n');
    if (newline == std::string::npos) {
      if (request.size() >= kMaxViewRequest) return refuse("a view token is 32 hex digits");
      absl::MutexLock lock(&mu_);
      if (auto it = connections_.find(conn); it != connections_.end()) {
        it->second.pending = std::move(request);
      }
      return false;
    }
    RedeemView(conn, request.substr(1, newline - 1), state.peer);
    return true;
  }
  if (byte != kDepositRequest) {
    return refuse(absl::StrCat("unknown request byte ", static_cast<int>(byte),
                               "; send 'R' with one fd (SCM_RIGHTS) or 'V' with a view token"));
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
