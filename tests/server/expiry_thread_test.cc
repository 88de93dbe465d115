// ExpiryThread: sweeps at the deadline its sweep returned, at once on
// Wake(), never while nothing is due, and stops on destruction.
#include "server/common/expiry_thread.h"

#include <atomic>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(ExpiryThreadTest, SweepsAtTheReturnedDeadlineAndOnWake) {
  std::atomic<int> sweeps{0};
  std::atomic<int64_t> deadline_ms{0};  // 0: none
  absl::Notification second;
  ExpiryThread thread([&](absl::Time now) {
    if (++sweeps == 2) second.Notify();
    const int64_t ms = deadline_ms.exchange(0);
    return ms == 0 ? absl::InfiniteFuture() : now + absl::Milliseconds(ms);
  });
  // The first sweep runs at start; with nothing due it waits for a Wake.
  const absl::Time begin = absl::Now();
  while (sweeps.load() < 1 && absl::Now() - begin < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(sweeps.load(), 1);
  deadline_ms = 50;
  thread.Wake();
  ASSERT_TRUE(second.WaitForNotificationWithTimeout(absl::Seconds(10)));
  // That sweep asked for another in 50 ms.
  const absl::Time start = absl::Now();
  while (sweeps.load() < 3 && absl::Now() - start < absl::Seconds(10)) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(sweeps.load(), 3);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(sweeps.load(), 3);  // nothing due since
}

TEST(ExpiryThreadTest, DestructionStopsAThreadWaitingForever) {
  const absl::Time start = absl::Now();
  {
    ExpiryThread thread([](absl::Time) { return absl::InfiniteFuture(); });
  }
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
}

}  // namespace
}  // namespace placement::server
