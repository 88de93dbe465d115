// ProcessExitWatcher: runs a callback once when a watched process exits (its
// pidfd turns readable), on one background thread (epoll over the pidfds).
// The region registry uses it to unregister a region that was registered
// outside a session when the process that passed its fd goes (a client
// killed with SIGKILL leaves nothing mapped).
//
// Thread-safe. Callbacks run on the watcher's thread without its lock held;
// they may cancel watches (their own included). The destructor stops the
// thread (waiting for a callback in progress) without running the others.
#ifndef PLACEMENT_SERVER_REGION_PROCESS_EXIT_WATCHER_H_
#define PLACEMENT_SERVER_REGION_PROCESS_EXIT_WATCHER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/region/peer_process.h"

namespace placement::server {

// A process ready to be watched: our own dup of its pidfd (epoll takes each
// open fd once, and the PeerProcess may be destroyed before the watch
// ends). Move-only; closes the fd unless a Watch took it.
class WatchablePid {
 public:
  WatchablePid(WatchablePid&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  WatchablePid& operator=(WatchablePid&& other) noexcept;
  ~WatchablePid();

 private:
  friend class ProcessExitWatcher;
  explicit WatchablePid(int fd) : fd_(fd) {}
  int fd_ = -1;
};

class ProcessExitWatcher {
 public:
  // INTERNAL when epoll or eventfd cannot be made.
  static absl::StatusOr<std::unique_ptr<ProcessExitWatcher>> Create();
  ~ProcessExitWatcher();
  ProcessExitWatcher(const ProcessExitWatcher&) = delete;
  ProcessExitWatcher& operator=(const ProcessExitWatcher&) = delete;

  // Whether `process` can be watched, checked before anything is made that
  // only its exit would end. FAILED_PRECONDITION when this daemon has no
  // pidfd for it (a pid namespace it cannot see, or the process had exited
  // when it connected); RESOURCE_EXHAUSTED when this daemon was or is out
  // of fds (for the pidfd when the process connected, or to duplicate it
  // now). The message names the process.
  static absl::StatusOr<WatchablePid> Prepare(const PeerProcess& process);
  // Runs `on_exit` once the process exited (at once, on the watcher's
  // thread, if it already has). Returns a key for Cancel (never 0). Should
  // the kernel refuse the watch (epoll out of memory or past
  // fs.epoll.max_user_watches), it is logged and never fires.
  int64_t Watch(WatchablePid process, std::function<void()> on_exit);
  // Forgets a watch; afterwards its callback never starts (one already
  // running on the watcher's thread may still finish). Unknown keys are
  // ignored.
  void Cancel(int64_t key);
  // Watches pending now.
  int64_t size() const;

 private:
  ProcessExitWatcher(int epoll_fd, int wake_fd);
  void Run();

  struct Entry {
    int fd = -1;  // our dup of the process's pidfd
    std::function<void()> on_exit;
  };
  const int epoll_fd_;
  const int wake_fd_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  int64_t next_key_ ABSL_GUARDED_BY(mu_) = 1;
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_PROCESS_EXIT_WATCHER_H_
