#include "server/cluster/deadline_timer.h"

#include <atomic>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(DeadlineTimerTest, RunsCallbacksInTimeOrder) {
  DeadlineTimer timer;
  absl::Mutex mu;
  std::vector<int> order;
  absl::Notification last;
  const absl::Time now = absl::Now();
  timer.Schedule(now + absl::Milliseconds(30), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(3);
    last.Notify();
  });
  timer.Schedule(now + absl::Milliseconds(10), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(2);
  });
  timer.Schedule(now - absl::Seconds(1), [&] {
    absl::MutexLock lock(&mu);
    order.push_back(1);
  });
  last.WaitForNotification();
  absl::MutexLock lock(&mu);
  EXPECT_EQ(order, (std::vector<int>{1, 2, 3}));
}

TEST(DeadlineTimerTest, CancelledCallbacksNeverRun) {
  DeadlineTimer timer;
  std::atomic<int> ran{0};
  std::vector<DeadlineTimer::Id> ids;
  for (int i = 0; i < 1000; ++i) {
    ids.push_back(timer.Schedule(absl::Now() + absl::Milliseconds(50), [&] { ++ran; }));
  }
  EXPECT_EQ(timer.pending(), 1000u);
  for (DeadlineTimer::Id id : ids) EXPECT_TRUE(timer.Cancel(id));
  EXPECT_FALSE(timer.Cancel(ids.front()));
  EXPECT_EQ(timer.pending(), 0u);
  absl::Notification after;
  timer.Schedule(absl::Now() + absl::Milliseconds(60), [&] { after.Notify(); });
  after.WaitForNotification();
  EXPECT_EQ(ran.load(), 0);
}

TEST(DeadlineTimerTest, AnEarlierCallbackScheduledLaterRunsFirst) {
  DeadlineTimer timer;
  absl::Notification early;
  std::atomic<bool> late_ran{false};
  timer.Schedule(absl::Now() + absl::Hours(1), [&] { late_ran = true; });
  timer.Schedule(absl::Now(), [&] { early.Notify(); });
  early.WaitForNotification();
  EXPECT_FALSE(late_ran.load());
  EXPECT_EQ(timer.pending(), 1u);  // destroyed with the hour-long one pending
}

}  // namespace
}  // namespace placement::server
