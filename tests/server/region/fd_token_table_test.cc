#include "server/region/fd_token_table.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/region/peer_process.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

int NewFd() { return open("/dev/null", O_RDONLY | O_CLOEXEC); }

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) >= 0; }

TEST(FdTokenTableTest, ATokenGivesItsFdOnceToWhoeverHoldsIt) {
  FdTokenTable table(FdTokenLimits{});
  std::shared_ptr<PeerProcess> self = PeerProcess::Self();
  const int fd = NewFd();
  absl::StatusOr<std::string> token = table.Deposit(fd, self);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_THAT(*token, ::testing::MatchesRegex("[0-9a-f]{32}"));
  absl::StatusOr<ClaimedFd> claimed = table.Take(*token, "the socket");
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  EXPECT_EQ(claimed->fd, fd);
  EXPECT_EQ(claimed->depositor, self);
  close(claimed->fd);
  absl::StatusOr<ClaimedFd> again = table.Take(*token, "the socket");
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(again.status().message(), HasSubstr("pass the fd again on the socket"));
  EXPECT_EQ(table.size(), 0);
}

// A claim is checked against its depositor before it uses the token up
// (RegisterRegion refuses a process it cannot watch and leaves the token).
TEST(FdTokenTableTest, DepositorOfLeavesTheToken) {
  FdTokenTable table(FdTokenLimits{});
  std::shared_ptr<PeerProcess> self = PeerProcess::Self();
  absl::StatusOr<std::string> token = table.Deposit(NewFd(), self);
  ASSERT_TRUE(token.ok()) << token.status();
  absl::StatusOr<std::shared_ptr<PeerProcess>> depositor = table.DepositorOf(*token, "here");
  ASSERT_TRUE(depositor.ok()) << depositor.status();
  EXPECT_EQ(*depositor, self);
  EXPECT_EQ(table.size(), 1);
  absl::StatusOr<ClaimedFd> claimed = table.Take(*token, "here");
  ASSERT_TRUE(claimed.ok()) << claimed.status();
  close(claimed->fd);
  EXPECT_EQ(table.DepositorOf(*token, "here").status().code(), absl::StatusCode::kNotFound);
}

TEST(FdTokenTableTest, ExpiredTokensCloseTheirFdsAndSweepSaysWhenTheNextGoes) {
  FdTokenLimits limits;
  limits.ttl = absl::Seconds(60);
  FdTokenTable table(limits);
  const absl::Time before = absl::Now();
  const int fd = NewFd();
  ASSERT_TRUE(table.Deposit(fd, PeerProcess::Self()).ok());
  const absl::Time next = table.Sweep(absl::Now());
  EXPECT_GE(next, before + limits.ttl);
  EXPECT_LE(next, absl::Now() + limits.ttl);
  EXPECT_TRUE(IsOpen(fd));
  EXPECT_EQ(table.Sweep(next), absl::InfiniteFuture());
  EXPECT_EQ(table.size(), 0);
  EXPECT_FALSE(IsOpen(fd));
}

TEST(FdTokenTableTest, BoundsRefuseTheNewcomerAndNamePerProcessPerUidAndTotal) {
  FdTokenLimits limits;
  limits.max_per_process = 2;
  limits.max_per_uid = 3;
  limits.max_total = 4;
  FdTokenTable table(limits);
  std::shared_ptr<PeerProcess> self = PeerProcess::Self();
  ASSERT_TRUE(table.Deposit(NewFd(), self).ok());
  ASSERT_TRUE(table.Deposit(NewFd(), self).ok());
  const int refused = NewFd();
  absl::StatusOr<std::string> third = table.Deposit(refused, self);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(),
              HasSubstr(self->Describe() + " already has 2 unclaimed fds (the per-process bound)"));
  EXPECT_FALSE(IsOpen(refused));  // a refused fd is closed
  // Another process of the same uid: the uid's bound.
  std::shared_ptr<PeerProcess> unseen = PeerProcess::Unseen(getuid(), getgid());
  ASSERT_TRUE(table.Deposit(NewFd(), unseen).ok());
  absl::StatusOr<std::string> fourth = table.Deposit(NewFd(), unseen);
  EXPECT_THAT(fourth.status().message(), HasSubstr("(the per-uid bound)"));
  // Another uid: the total.
  ASSERT_TRUE(table.Deposit(NewFd(), PeerProcess::Unseen(getuid() + 1, getgid())).ok());
  absl::StatusOr<std::string> fifth =
      table.Deposit(NewFd(), PeerProcess::Unseen(getuid() + 2, getgid()));
  EXPECT_THAT(fifth.status().message(), HasSubstr("the daemon holds 4 unclaimed fds (its bound)"));
  EXPECT_EQ(table.size(), 4);
}

// Processes in a pid namespace the daemon cannot see all show as pid 0:
// none of them may fill a per-process bound the others would share. Their
// uid's bound still holds.
TEST(FdTokenTableTest, ProcessesOfAnUnseenPidNamespaceAreBoundedByTheirUidOnly) {
  FdTokenLimits limits;
  limits.max_per_process = 2;
  limits.max_per_uid = 5;
  FdTokenTable table(limits);
  std::shared_ptr<PeerProcess> first = PeerProcess::Unseen(4000, 4000);
  std::shared_ptr<PeerProcess> second = PeerProcess::Unseen(4000, 4000);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(table.Deposit(NewFd(), first).ok()) << i;
  ASSERT_TRUE(table.Deposit(NewFd(), second).ok());
  ASSERT_TRUE(table.Deposit(NewFd(), second).ok());
  absl::StatusOr<std::string> sixth = table.Deposit(NewFd(), second);
  EXPECT_THAT(sixth.status().message(),
              HasSubstr("uid 4000 already has 5 unclaimed fds (the per-uid bound)"));
}

}  // namespace
}  // namespace placement::server
