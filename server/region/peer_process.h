// PeerProcess: the process at the other end of a unix socket connection, as
// the kernel reports it (SO_PEERCRED): its pid, uid and gid, and a pidfd
// (SO_PEERPIDFD, else pidfd_open of the pid) that keeps naming that process
// after it exits, so a reused pid cannot be mistaken for it.
//
// The fd-passing socket records one per connection: the tokens a process
// deposits are bounded per process and per uid, and a region registered
// outside a session lives only as long as the process that passed its fd.
//
// Thread-safe (immutable; Exited polls the pidfd).
#ifndef PLACEMENT_SERVER_REGION_PEER_PROCESS_H_
#define PLACEMENT_SERVER_REGION_PEER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placement::server {

class PeerProcess {
 public:
  // The peer of connected unix socket `conn`. INTERNAL when the kernel does
  // not say. pid() is 0 and pidfd() -1 when the peer is in a pid namespace
  // this process cannot see (its lifetime is then unknown).
  static absl::StatusOr<std::shared_ptr<PeerProcess>> OfSocket(int conn);
  // This process (for tests and in-process callers).
  static std::shared_ptr<PeerProcess> Self();
  // A process of `uid`/`gid` in a pid namespace this one cannot see, as
  // OfSocket reports it: pid 0, no pidfd (for tests).
  static std::shared_ptr<PeerProcess> Unseen(uid_t uid, gid_t gid);
  ~PeerProcess();
  PeerProcess(const PeerProcess&) = delete;
  PeerProcess& operator=(const PeerProcess&) = delete;

  pid_t pid() const { return pid_; }
  // False for a process in a pid namespace this one cannot see (pid 0):
  // nothing tells two such processes apart, so per-process bounds do not
  // count them (their uid's bounds do).
  bool pid_known() const { return pid_ > 0; }
  uid_t uid() const { return uid_; }
  gid_t gid() const { return gid_; }
  // Readable once the process exited; -1 when unknown. Owned by this object.
  int pidfd() const { return pidfd_; }
  // Why pidfd() is -1 for a process whose pid is known: the errno of the
  // failed open (EMFILE / ENFILE: this daemon was out of fds; ESRCH: the
  // process had exited). 0 otherwise.
  int pidfd_error() const { return pidfd_error_; }
  // True once the process exited (false when its lifetime is unknown).
  bool Exited() const;
  // "pid 4242 (uid 1000)", for messages and logs.
  std::string Describe() const;

 private:
  PeerProcess(pid_t pid, uid_t uid, gid_t gid, int pidfd, int pidfd_error = 0)
      : pid_(pid), uid_(uid), gid_(gid), pidfd_(pidfd), pidfd_error_(pidfd_error) {}
  const pid_t pid_;
  const uid_t uid_;
  const gid_t gid_;
  const int pidfd_;
  const int pidfd_error_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_PEER_PROCESS_H_
