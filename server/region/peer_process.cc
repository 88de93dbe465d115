#include "server/region/peer_process.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77  // Linux 6.5; older kernels answer ENOPROTOOPT
#endif

namespace placement::server {
namespace {

// glibc's <sys/pidfd.h> declares pidfd_open without C linkage for C++.
int PidfdOpen(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }

}  // namespace

absl::StatusOr<std::shared_ptr<PeerProcess>> PeerProcess::OfSocket(int conn) {
  ucred cred{};
  socklen_t length = sizeof(cred);
  if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) {
    return absl::InternalError(
        absl::StrCat("SO_PEERCRED on the region socket: ", std::strerror(errno)));
  }
  int pidfd = -1;
  int pidfd_error = 0;
  if (cred.pid > 0) {
    // The kernel's pidfd names the process that connected even if it exited
    // since; pidfd_open of the pid is the fallback on kernels before 6.5.
    length = sizeof(pidfd);
    if (getsockopt(conn, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &length) != 0) {
      pidfd = PidfdOpen(cred.pid);
      if (pidfd < 0) pidfd_error = errno;
    }
  }
  return std::shared_ptr<PeerProcess>(
      new PeerProcess(cred.pid, cred.uid, cred.gid, pidfd, pidfd_error));
}

std::shared_ptr<PeerProcess> PeerProcess::Self() {
  return std::shared_ptr<PeerProcess>(
      new PeerProcess(getpid(), getuid(), getgid(), PidfdOpen(getpid())));
}

std::shared_ptr<PeerProcess> PeerProcess::Unseen(uid_t uid, gid_t gid) {
  return std::shared_ptr<PeerProcess>(new PeerProcess(0, uid, gid, -1));
}

PeerProcess::~PeerProcess() {
  if (pidfd_ >= 0) close(pidfd_);
}

bool PeerProcess::Exited() const {
  if (pidfd_ < 0) return false;
  pollfd p{pidfd_, POLLIN, 0};
  return poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP)) != 0;
}

std::string PeerProcess::Describe() const {
  return absl::StrCat("pid ", pid_, " (uid ", uid_, ")");
}

}  // namespace placement::server
