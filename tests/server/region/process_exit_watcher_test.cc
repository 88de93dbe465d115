#include "server/region/process_exit_watcher.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "server/region/peer_process.h"
#include "tests/testing/fd_exhaustion.h"

namespace placement::server {
namespace {

// A child process at the other end of a unix socket, as the region socket
// sees its clients (SO_PEERCRED, a pidfd): the child connects after the
// fork (a socketpair would report its creator). It waits until killed.
struct Child {
  Child() {
    const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    // Abstract (leading NUL), unique to this process.
    const std::string name = "placement-exit-watcher-test-" + std::to_string(getpid());
    std::memcpy(address.sun_path + 1, name.data(), name.size());
    const socklen_t length =
        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    EXPECT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), length), 0);
    EXPECT_EQ(listen(listener, 1), 0);
    pid = fork();
    if (pid == 0) {
      close(listener);
      const int conn = socket(AF_UNIX, SOCK_STREAM, 0);
      if (connect(conn, reinterpret_cast<sockaddr*>(&address), length) != 0) _exit(1);
      pause();
      _exit(0);
    }
    EXPECT_GT(pid, 0);
    // A child that could not connect must not leave the accept waiting.
    pollfd ready{listener, POLLIN, 0};
    const int conn = pid > 0 && poll(&ready, 1, 30'000) == 1
                         ? accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)
                         : -1;
    close(listener);
    EXPECT_GE(conn, 0);
    if (conn < 0) return;
    absl::StatusOr<std::shared_ptr<PeerProcess>> peer = PeerProcess::OfSocket(conn);
    EXPECT_TRUE(peer.ok()) << peer.status();
    if (peer.ok()) process = *std::move(peer);
    close(conn);
  }
  ~Child() {
    if (pid > 0) Kill();
  }
  void Kill() {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  pid_t pid = -1;
  std::shared_ptr<PeerProcess> process;
};

TEST(ProcessExitWatcherTest, RunsTheCallbackOnceTheProcessExits) {
  auto watcher = ProcessExitWatcher::Create();
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  Child child;
  ASSERT_NE(child.process, nullptr);
  ASSERT_EQ(child.process->pid(), child.pid);
  absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*child.process);
  ASSERT_TRUE(watchable.ok()) << watchable.status();
  absl::Notification exited;
  const int64_t key = (*watcher)->Watch(*std::move(watchable), [&] { exited.Notify(); });
  EXPECT_NE(key, 0);
  EXPECT_EQ((*watcher)->size(), 1);
  EXPECT_FALSE(exited.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  child.Kill();
  EXPECT_TRUE(exited.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

TEST(ProcessExitWatcherTest, ACancelledWatchNeverRuns) {
  auto watcher = ProcessExitWatcher::Create();
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  Child child;
  ASSERT_NE(child.process, nullptr);
  absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*child.process);
  ASSERT_TRUE(watchable.ok()) << watchable.status();
  std::atomic<bool> ran = false;
  const int64_t key = (*watcher)->Watch(*std::move(watchable), [&] { ran = true; });
  (*watcher)->Cancel(key);
  EXPECT_EQ((*watcher)->size(), 0);
  child.Kill();
  // A second watch on another exit, after the first: the watcher's thread
  // has passed the cancelled one's exit by the time this one runs.
  Child other;
  ASSERT_NE(other.process, nullptr);
  absl::StatusOr<WatchablePid> other_watchable = ProcessExitWatcher::Prepare(*other.process);
  ASSERT_TRUE(other_watchable.ok()) << other_watchable.status();
  absl::Notification second;
  (*watcher)->Watch(*std::move(other_watchable), [&] { second.Notify(); });
  other.Kill();
  ASSERT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_FALSE(ran);
}

TEST(ProcessExitWatcherTest, AProcessWithoutAPidfdCannotBeWatched) {
  // As a client in a pid namespace the daemon cannot see shows.
  std::shared_ptr<PeerProcess> unseen = PeerProcess::Unseen(1000, 1000);
  absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*unseen);
  EXPECT_EQ(watchable.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(watchable.status().message(),
            "this daemon cannot watch pid 0 (uid 1000): no pidfd (a pid namespace it cannot see, "
            "or the process had exited when it connected)");
}

TEST(ProcessExitWatcherTest, OutOfFdsPrepareSaysWhyAndNothingIsWatched) {
  Child child;
  ASSERT_NE(child.process, nullptr);
  testing::FdExhaustion exhausted;
  ASSERT_TRUE(exhausted.ok());
  absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*child.process);
  EXPECT_EQ(watchable.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(watchable.status().message(),
            "this daemon cannot watch " + child.process->Describe() +
                ": duplicating its pidfd failed: Too many open files");
}

}  // namespace
}  // namespace placement::server
