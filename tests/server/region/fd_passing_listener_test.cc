// The region socket against real clients on real unix sockets: connections
// are served concurrently (idle ones stall nobody and are closed after the
// timeout), unclaimed fds are bounded per process, per uid and in total and a
// flooding process never evicts another's token, requests are checked, the
// depositor's credentials travel with the fd, and a path socket gets the mode
// and group it was given.
#include "server/region/fd_passing_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/fd_exhaustion.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string AbstractName() {
  static int counter = 0;
  return absl::StrCat("@placement-fd-listener-test-", getpid(), "-", counter++);
}

// A connected socket that sends nothing.
int ConnectIdle(const std::string& address) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socklen_t length;
  if (address[0] == '@') {
    std::memcpy(addr.sun_path + 1, address.data() + 1, address.size() - 1);
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size());
  } else {
    std::memcpy(addr.sun_path, address.data(), address.size());
    length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address.size() + 1);
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the daemon side writes before closing (bounded by a timeout).
std::string ReadAll(int fd) {
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string out;
  char buffer[256];
  while (true) {
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

absl::StatusOr<std::string> PassMemfd(const std::string& address) {
  absl::StatusOr<int> fd = client::CreateSealedMemfd("fd-listener-test", 4096);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::string> token = client::PassFd(address, *fd);
  close(*fd);
  return token;
}

TEST(FdPassingListenerTest, IdleConnectionsStallNobody) {
  auto listener = FdPassingListener::Start(AbstractName());
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::vector<int> idle;
  for (int i = 0; i < 50; ++i) {
    idle.push_back(ConnectIdle((*listener)->address()));
    ASSERT_GE(idle.back(), 0);
  }
  // With the connections served one at a time, each idle one held the
  // socket for a second and this pass timed out; now it is answered while
  // all fifty stay open.
  absl::StatusOr<std::string> token = PassMemfd((*listener)->address());
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(token->size(), 32u);
  // The passing connection is closed by the listener's thread after it
  // answered, which can be after the client read the answer: wait for it.
  int64_t open = -1;
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;
       absl::SleepFor(absl::Milliseconds(5))) {
    open = (*listener)->connections();
    if (open == 50) break;
  }
  EXPECT_EQ(open, 50);
  auto claimed = (*listener)->TakeFd(*token);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(claimed->depositor->pid(), getpid());
  EXPECT_EQ(claimed->depositor->uid(), getuid());
  close(claimed->fd);
  for (int fd : idle) close(fd);
}

TEST(FdPassingListenerTest, IdleConnectionsAreClosedAfterTheTimeout) {
  FdPassingOptions options;
  options.connection_timeout = absl::Milliseconds(200);
  auto listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  const int idle = ConnectIdle((*listener)->address());
  ASSERT_GE(idle, 0);
  EXPECT_THAT(ReadAll(idle), StartsWith("ERR nothing received within 200ms"));
  close(idle);
  EXPECT_EQ((*listener)->connections(), 0);
}

// An unclaimed fd goes at its ttl although nobody deposits or claims
// another (before, expired tokens were dropped only then, and their
// memory stayed alive).
TEST(FdPassingListenerTest, UnclaimedFdsGoAtTheirTtlByThemselves) {
  FdPassingOptions options;
  options.tokens.ttl = absl::Milliseconds(100);
  auto listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  ASSERT_TRUE(PassMemfd((*listener)->address()).ok());
  EXPECT_EQ((*listener)->pending(), 1);
  const absl::Time limit = absl::Now() + absl::Seconds(10);
  while ((*listener)->pending() > 0 && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ((*listener)->pending(), 0);
}

// Out of fds, the listener answers a waiting client and closes it (with an
// fd it keeps spare for this) instead of leaving it queued while its loop
// spins on the listening socket.
TEST(FdPassingListenerTest, OutOfFdsAClientIsToldWhy) {
  auto listener = FdPassingListener::Start(AbstractName(), FdPassingOptions{});
  ASSERT_TRUE(listener.ok()) << listener.status();
  // Every fd but one taken; the client takes that one.
  testing::FdExhaustion exhausted(/*leave_free=*/1);
  ASSERT_TRUE(exhausted.ok());
  const int client = ConnectIdle((*listener)->address());
  std::string said = client >= 0 ? ReadAll(client) : "";
  if (client >= 0) close(client);
  exhausted.Release();
  ASSERT_GE(client, 0);
  EXPECT_THAT(said, StartsWith("ERR the daemon is out of file descriptors"));
}

TEST(FdPassingListenerTest, ConnectionsArePerProcessBounded) {
  FdPassingOptions options;
  options.max_connections_per_process = 3;
  auto listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  std::vector<int> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(ConnectIdle((*listener)->address()));
  const int fourth = ConnectIdle((*listener)->address());
  EXPECT_THAT(ReadAll(fourth), HasSubstr("already has 3 connections open to the region socket"));
  close(fourth);
  for (int fd : idle) close(fd);
}

// A child process deposits `count` fds and exits with how many were
// accepted (capped at 255).
int FloodFromChild(const std::string& address, int count) {
  const pid_t child = fork();
  if (child == 0) {
    int accepted = 0;
    for (int i = 0; i < count; ++i) {
      if (PassMemfd(address).ok()) ++accepted;
    }
    _exit(std::min(accepted, 255));
  }
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(FdPassingListenerTest, AFloodingProcessNeverEvictsAnotherProcesssToken) {
  auto listener = FdPassingListener::Start(AbstractName());
  ASSERT_TRUE(listener.ok()) << listener.status();
  absl::StatusOr<std::string> mine = PassMemfd((*listener)->address());
  ASSERT_TRUE(mine.ok()) << mine.status();
  // 300 fds from another process: the per-process bound (32) keeps all but
  // 32 of them out; before, the 257th evicted the oldest token -- mine.
  EXPECT_EQ(FloodFromChild((*listener)->address(), 300), 32);
  EXPECT_EQ((*listener)->pending(), 33);
  auto claimed = (*listener)->TakeFd(*mine);
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  close(claimed->fd);
  // And this process can still deposit.
  EXPECT_TRUE(PassMemfd((*listener)->address()).ok());
}

TEST(FdPassingListenerTest, BoundsNameTheirLimit) {
  FdPassingOptions options;
  options.tokens.max_per_process = 2;
  auto listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(PassMemfd((*listener)->address()).ok());
  ASSERT_TRUE(PassMemfd((*listener)->address()).ok());
  absl::StatusOr<std::string> third = PassMemfd((*listener)->address());
  EXPECT_EQ(third.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(third.status().message(),
              HasSubstr(absl::StrCat("pid ", getpid(), " (uid ", getuid(),
                                     ") already has 2 unclaimed fds (the per-process bound)")));

  options.tokens.max_per_process = 100;
  options.tokens.max_per_uid = 1;
  listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(PassMemfd((*listener)->address()).ok());
  EXPECT_THAT(PassMemfd((*listener)->address()).status().message(),
              HasSubstr("already has 1 unclaimed fds (the per-uid bound)"));

  options.tokens.max_per_uid = 100;
  options.tokens.max_total = 1;
  listener = FdPassingListener::Start(AbstractName(), options);
  ASSERT_TRUE(listener.ok());
  ASSERT_TRUE(PassMemfd((*listener)->address()).ok());
  EXPECT_THAT(PassMemfd((*listener)->address()).status().message(),
              HasSubstr("the daemon holds 1 unclaimed fds (its bound)"));
}

TEST(FdPassingListenerTest, RequestsCarryTheByteRAndExactlyOneFd) {
  auto listener = FdPassingListener::Start(AbstractName());
  ASSERT_TRUE(listener.ok());
  int conn = ConnectIdle((*listener)->address());
  ASSERT_EQ(send(conn, "X", 1, 0), 1);
  EXPECT_THAT(ReadAll(conn), StartsWith("ERR unknown request byte 88"));
  close(conn);
  conn = ConnectIdle((*listener)->address());
  ASSERT_EQ(send(conn, "R", 1, 0), 1);
  EXPECT_THAT(ReadAll(conn), StartsWith("ERR expected exactly one fd (SCM_RIGHTS), got 0"));
  close(conn);
  EXPECT_EQ((*listener)->pending(), 0);
  auto unknown = (*listener)->TakeFd(std::string(32, 'f'));
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
}

TEST(FdPassingListenerTest, APathSocketGetsItsModeAndGroup) {
  testing::TempDir dir;
  const std::string path = dir.path() + "/regions.sock";
  FdPassingOptions options;
  options.access.mode = 0600;
  options.access.group = 65534;
  auto listener = FdPassingListener::Start(path, options);
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_gid, 65534u);
  EXPECT_TRUE(PassMemfd(path).ok());
  // A second listener cannot take a live socket; the file goes with the
  // listener.
  EXPECT_EQ(FdPassingListener::Start(path).status().code(), absl::StatusCode::kUnavailable);
  listener->reset();
  EXPECT_NE(stat(path.c_str(), &st), 0);
}

}  // namespace
}  // namespace placement::server
