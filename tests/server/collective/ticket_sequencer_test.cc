// TicketSequencer alone: order, gaps, refusals, cancellation, Close. Calls
// that must be waiting are detected through the `cancelled` poll, never by
// sleeping.
#include <atomic>
#include <functional>
#include <thread>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#if PLACEMENT_WITH_GLOO
#include "server/collective/cluster/ticket_sequencer.h"
#endif

namespace placement::server {
namespace {

#if PLACEMENT_WITH_GLOO

using ::testing::HasSubstr;

constexpr absl::Duration kLongGap = absl::Seconds(60);

// A context whose `cancelled` poll announces (once) that the call waits, and
// that reports cancellation once `cancel` is set.
class WaitingContext {
 public:
  WaitingContext() {
    context_.cancelled = [this] {
      if (!polled_.exchange(true)) waiting_.Notify();
      return cancel_.load();
    };
  }
  const CollectiveContext& context() const { return context_; }
  bool WaitUntilWaiting() { return waiting_.WaitForNotificationWithTimeout(absl::Seconds(20)); }
  void Cancel() { cancel_.store(true); }

 private:
  CollectiveContext context_;
  std::atomic<bool> polled_{false};
  std::atomic<bool> cancel_{false};
  absl::Notification waiting_;
};

TEST(TicketSequencerTest, RunsInOrderAndRefusesPassedTickets) {
  TicketSequencer seq("set 0,1 epoch 0", kLongGap);
  for (uint64_t t = 0; t < 3; ++t) {
    ASSERT_TRUE(seq.Acquire(t, {}).ok());
    // Running: the same ticket again is refused.
    absl::Status again = seq.Acquire(t, {});
    EXPECT_EQ(again.code(), absl::StatusCode::kFailedPrecondition) << again;
    EXPECT_THAT(std::string(again.message()), HasSubstr("is running here already"));
    seq.Finish(t);
  }
  EXPECT_EQ(seq.next(), 3u);
  absl::Status old = seq.Acquire(1, {});
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(old.message()),
              HasSubstr("ticket 1 of set 0,1 epoch 0 is older than what already ran"));
  // A later ticket given up before its turn: refused as such, not as older.
  seq.Abandon(5);
  absl::Status abandoned = seq.Acquire(5, {});
  EXPECT_EQ(abandoned.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(abandoned.message()),
              HasSubstr("ticket 5 of set 0,1 epoch 0 was given up here already"));
}

TEST(TicketSequencerTest, LaterTicketWaitsForItsPredecessor) {
  TicketSequencer seq("s", kLongGap);
  WaitingContext waiter;
  absl::Status second;
  std::thread t([&] { second = seq.Acquire(1, waiter.context()); });
  ASSERT_TRUE(waiter.WaitUntilWaiting());
  // The same ticket while it waits is a duplicate.
  EXPECT_EQ(seq.Acquire(1, {}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(seq.Acquire(0, {}).ok());
  seq.Finish(0);
  t.join();
  ASSERT_TRUE(second.ok()) << second;
  seq.Finish(1);
  EXPECT_EQ(seq.next(), 2u);
}

TEST(TicketSequencerTest, MissingPredecessorIsSkippedAfterTheGap) {
  const absl::Duration kGap = absl::Milliseconds(60);
  TicketSequencer seq("s", kGap);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(seq.Acquire(2, {}).ok());
  EXPECT_GE(absl::Now() - start, kGap);
  EXPECT_EQ(seq.next(), 2u);
  seq.Finish(2);
  EXPECT_EQ(seq.Acquire(0, {}).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(seq.Acquire(1, {}).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(seq.Acquire(3, {}).ok());
}

TEST(TicketSequencerTest, RunningPredecessorIsNeverSkipped) {
  TicketSequencer seq("s", absl::Milliseconds(10));
  ASSERT_TRUE(seq.Acquire(0, {}).ok());
  // Ticket 0 runs (say, a slow Gloo operation) for 20x the gap: ticket 1
  // keeps waiting until its own deadline.
  CollectiveContext context;
  context.deadline = absl::Now() + absl::Milliseconds(200);
  absl::Status s = seq.Acquire(1, context);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("while ticket 1 of s waited for ticket 0"));
  seq.Finish(0);
  // Ticket 1 gave up and counts as finished.
  EXPECT_EQ(seq.next(), 2u);
}

TEST(TicketSequencerTest, CancelledWaiterCountsAsFinished) {
  TicketSequencer seq("s", kLongGap);
  WaitingContext waiter;
  absl::Status s;
  std::thread t([&] { s = seq.Acquire(1, waiter.context()); });
  ASSERT_TRUE(waiter.WaitUntilWaiting());
  waiter.Cancel();
  t.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
  ASSERT_TRUE(seq.Acquire(0, {}).ok());
  seq.Finish(0);
  EXPECT_EQ(seq.next(), 2u);
  ASSERT_TRUE(seq.Acquire(2, {}).ok());
}

TEST(TicketSequencerTest, AbandonedTicketsDoNotLeaveGaps) {
  TicketSequencer seq("s", kLongGap);
  seq.Abandon(0);
  seq.Abandon(3);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(seq.Acquire(1, {}).ok());
  seq.Finish(1);
  ASSERT_TRUE(seq.Acquire(2, {}).ok());
  seq.Finish(2);
  EXPECT_EQ(seq.next(), 4u);
  ASSERT_TRUE(seq.Acquire(4, {}).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(seq.Acquire(3, {}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST(TicketSequencerTest, CloseFailsWaitingAndLaterCalls) {
  TicketSequencer seq("s", kLongGap);
  WaitingContext waiter;
  absl::Status s;
  std::thread t([&] { s = seq.Acquire(1, waiter.context()); });
  ASSERT_TRUE(waiter.WaitUntilWaiting());
  seq.Close();
  t.join();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("retired"));
  EXPECT_EQ(seq.Acquire(0, {}).code(), absl::StatusCode::kFailedPrecondition);
}

#else

TEST(TicketSequencerTest, NotBuilt) {
  GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)";
}

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
