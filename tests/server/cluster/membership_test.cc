#include "server/cluster/membership.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

JoinInfo Member(int32_t index, int32_t n, std::string instance, int devices = 2) {
  JoinInfo info;
  info.process_index = index;
  info.num_processes = n;
  info.instance_id = std::move(instance);
  info.peer_address = "10.0.0." + std::to_string(index + 1) + ":7000";
  for (int i = 0; i < devices; ++i) {
    DeviceDescription d;
    d.id = 1000 + i;  // ignored: the coordinator assigns ids
    d.platform = "cpu";
    info.devices.push_back(d);
  }
  return info;
}

MembershipOptions Options(int32_t n) {
  MembershipOptions o;
  o.num_processes = n;
  o.heartbeat_interval = absl::Milliseconds(50);
  o.heartbeat_misses = 2;
  return o;
}

TEST(MembershipTest, FormsWithDenseIdsOnceEveryoneJoined) {
  DeadlineTimer timer;
  Membership m(Options(2), &timer);
  std::vector<ClusterView> views;
  m.AddListener([&](const ClusterView& v) { views.push_back(v); });
  absl::StatusOr<ClusterView> first;
  std::thread joiner([&] { first = m.JoinBlocking(Member(1, 2, "b", 3), absl::Seconds(10)); });
  absl::StatusOr<ClusterView> zero = m.JoinBlocking(Member(0, 2, "a", 2), absl::Seconds(10));
  joiner.join();
  ASSERT_TRUE(zero.ok()) << zero.status();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(zero->epoch, 1);
  EXPECT_EQ(zero->state, ClusterState::kFormed);
  EXPECT_EQ(zero->processes[1].first_device_id, 2);
  EXPECT_EQ(zero->processes[1].devices[2].id, 4);
  EXPECT_EQ(zero->processes[1].devices[2].process_index, 1);
  EXPECT_EQ(zero->ProcessOf(4), 1);
  EXPECT_EQ(zero->ProcessOf(5), -1);
  ASSERT_EQ(views.size(), 1u);
}

TEST(MembershipTest, RefusesBadJoinsWithTheNumbers) {
  DeadlineTimer timer;
  // A long interval: process 0's instance "a" counts as live while the
  // duplicate arrives, however late a loaded machine runs the timeout.
  MembershipOptions options = Options(2);
  options.heartbeat_interval = absl::Seconds(30);
  Membership m(options, &timer);
  EXPECT_THAT(m.JoinBlocking(Member(2, 2, "x"), absl::Milliseconds(10)).status().message(),
              HasSubstr("--process_index=2 is outside [0, 2)"));
  EXPECT_THAT(m.JoinBlocking(Member(0, 3, "x"), absl::Milliseconds(10)).status().message(),
              HasSubstr("--num_processes=3 but the coordinator has --num_processes=2"));
  auto timeout = m.JoinBlocking(Member(0, 2, "a"), absl::Milliseconds(20));
  EXPECT_EQ(timeout.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(timeout.status().message(), HasSubstr("process_index 1"));
  // A second live instance on a held index.
  auto duplicate = m.JoinBlocking(Member(0, 2, "other"), absl::Milliseconds(10));
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kAlreadyExists);
}

TEST(MembershipTest, SilentMembersAreLostAndRejoinWithTheirIds) {
  DeadlineTimer timer;
  Membership m(Options(2), &timer);
  std::thread joiner([&] { m.JoinBlocking(Member(1, 2, "b"), absl::Seconds(10)).IgnoreError(); });
  ASSERT_TRUE(m.JoinBlocking(Member(0, 2, "a"), absl::Seconds(10)).ok());
  joiner.join();
  ASSERT_TRUE(m.Heartbeat(0, "a").ok());
  // Process 1 stays silent past interval x misses.
  m.Sweep(absl::Now() + absl::Milliseconds(150));
  ClusterView v = m.View();
  EXPECT_EQ(v.processes[1].state, ProcessState::kLost);
  EXPECT_EQ(v.state, ClusterState::kDegraded);
  EXPECT_EQ(v.epoch, 2);  // one sweep, one change (process 0 was silent too)
  EXPECT_EQ(m.Heartbeat(1, "b").status().code(), absl::StatusCode::kNotFound);
  // A restart with another device count is refused; the same count rejoins.
  EXPECT_EQ(m.JoinBlocking(Member(1, 2, "b2", 5), absl::Seconds(1)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto back = m.JoinBlocking(Member(1, 2, "b2"), absl::Seconds(1));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->processes[1].joins, 2);
  EXPECT_EQ(back->processes[1].first_device_id, 2);
  EXPECT_EQ(back->processes[1].state, ProcessState::kAlive);
}

// 300 processes join; the waiting joins hold no thread and all learn the
// formed view when the last one arrives. A cluster that never forms times
// its joins out, naming who is missing.
TEST(MembershipTest, HundredsOfJoinsWaitWithoutThreads) {
  DeadlineTimer timer;
  constexpr int kN = 300;
  Membership m(Options(kN), &timer);
  std::vector<absl::StatusOr<ClusterView>> views(kN, absl::UnknownError("pending"));
  std::atomic<int> ended{0};
  for (int p = 0; p < kN; ++p) {
    m.Join(Member(p, kN, "i" + std::to_string(p), 1), absl::Seconds(60),
           [&, p](absl::StatusOr<ClusterView> v) {
             views[p] = std::move(v);
             ++ended;
           });
    EXPECT_EQ(ended.load(), p + 1 == kN ? kN : 0);
  }
  for (int p = 0; p < kN; ++p) {
    ASSERT_TRUE(views[p].ok()) << views[p].status();
    EXPECT_EQ(views[p]->state, ClusterState::kFormed);
    EXPECT_EQ(views[p]->processes[p].first_device_id, p);
  }
  EXPECT_EQ(timer.pending(), 0u);

  Membership never(Options(3), &timer);
  absl::Notification timed_out;
  never.Join(Member(1, 3, "x", 1), absl::Milliseconds(20), [&](absl::StatusOr<ClusterView> v) {
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_THAT(v.status().message(),
                HasSubstr("2 of 3 processes have not joined (process_index 0, 2)"));
    timed_out.Notify();
  });
  timed_out.WaitForNotification();
}

}  // namespace
}  // namespace placement::server
