#include "server/region/process_exit_watcher.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/logging.h"

namespace placement::server {

absl::StatusOr<std::unique_ptr<ProcessExitWatcher>> ProcessExitWatcher::Create() {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return absl::InternalError(absl::StrCat("epoll: ", std::strerror(errno)));
  const int wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    close(epoll_fd);
    return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = 0;  // key 0 = the wake fd
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, wake_fd, &event);
  return std::unique_ptr<ProcessExitWatcher>(new ProcessExitWatcher(epoll_fd, wake_fd));
}

ProcessExitWatcher::ProcessExitWatcher(int epoll_fd, int wake_fd)
    : epoll_fd_(epoll_fd), wake_fd_(wake_fd) {
  thread_ = std::thread([this] { Run(); });
}

ProcessExitWatcher::~ProcessExitWatcher() {
  const uint64_t one = 1;
  (void)write(wake_fd_, &one, sizeof(one));
  thread_.join();
  absl::MutexLock lock(&mu_);
  for (auto& [key, entry] : entries_) close(entry.fd);
  entries_.clear();
  close(epoll_fd_);
  close(wake_fd_);
}

WatchablePid& WatchablePid::operator=(WatchablePid&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

WatchablePid::~WatchablePid() {
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<WatchablePid> ProcessExitWatcher::Prepare(const PeerProcess& process) {
  if (process.pidfd() < 0 && (process.pidfd_error() == EMFILE || process.pidfd_error() == ENFILE)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this daemon cannot watch ", process.Describe(),
                     ": it was out of fds for the process's pidfd when the process connected"));
  }
  if (process.pidfd() < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("this daemon cannot watch ", process.Describe(),
                     ": no pidfd (a pid namespace it cannot see, or the process had exited when it "
                     "connected)"));
  }
  const int fd = fcntl(process.pidfd(), F_DUPFD_CLOEXEC, 0);
  if (fd < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this daemon cannot watch ", process.Describe(),
                     ": duplicating its pidfd failed: ", std::strerror(errno)));
  }
  return WatchablePid(fd);
}

int64_t ProcessExitWatcher::Watch(WatchablePid process, std::function<void()> on_exit) {
  const int fd = std::exchange(process.fd_, -1);
  absl::MutexLock lock(&mu_);
  const int64_t key = next_key_++;
  entries_[key] = Entry{fd, std::move(on_exit)};
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.u64 = static_cast<uint64_t>(key);
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    // ENOMEM, or ENOSPC past fs.epoll.max_user_watches: the watch stays
    // registered (Cancel works) but never fires.
    LogWarning("cannot watch a process's exit (epoll: ", std::strerror(errno),
               "); what ends with it stays until it is unregistered or the daemon stops");
  }
  return key;
}

void ProcessExitWatcher::Cancel(int64_t key) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  close(it->second.fd);
  entries_.erase(it);
}

int64_t ProcessExitWatcher::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

void ProcessExitWatcher::Run() {
  epoll_event events[32];
  while (true) {
    const int n = epoll_wait(epoll_fd_, events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;
    }
    for (int i = 0; i < n; ++i) {
      const int64_t key = static_cast<int64_t>(events[i].data.u64);
      if (key == 0) return;  // woken to stop
      std::function<void()> on_exit;
      {
        absl::MutexLock lock(&mu_);
        auto it = entries_.find(key);
        if (it == entries_.end()) continue;  // cancelled meanwhile
        epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second.fd, nullptr);
        close(it->second.fd);
        on_exit = std::move(it->second.on_exit);
        entries_.erase(it);
      }
      on_exit();
    }
  }
}

}  // namespace placement::server
