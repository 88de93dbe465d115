#include "server/collective/transport/abortable_rendezvous_store.h"

#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/transport/cross_process_transport.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

// A short poll keeps the test quick; the waits below bound themselves by
// the test's own generous budgets, never by timing thresholds.
constexpr absl::Duration kPoll = absl::Milliseconds(5);

TEST(AbortableRendezvousStoreTest, PassesValuesThroughWhileNotAborted) {
  InMemoryRendezvousStore inner;
  RendezvousAbort abort;
  AbortableRendezvousStore store(&inner, &abort, kPoll);
  ASSERT_TRUE(store.Set("gloo/e0/ring/0", "address").ok());
  EXPECT_EQ(*inner.Get("gloo/e0/ring/0", absl::ZeroDuration()), "address");
  // A key published while a Get waits, several slices in.
  std::thread late([&] {
    absl::SleepFor(10 * kPoll);
    inner.Set("gloo/e0/ring/1", "late").IgnoreError();
  });
  absl::StatusOr<std::string> got = store.Get("gloo/e0/ring/1", absl::Seconds(60));
  late.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "late");
  EXPECT_EQ(*store.DeletePrefix("gloo/e0/"), 2);
}

TEST(AbortableRendezvousStoreTest, AMissingKeyIsNamedWithTheWholeTimeout) {
  InMemoryRendezvousStore inner;
  RendezvousAbort abort;
  AbortableRendezvousStore store(&inner, &abort, kPoll);
  absl::StatusOr<std::string> got = store.Get("gloo/e0/ring/2", 8 * kPoll);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(got.status().message(), "rendezvous: key 'gloo/e0/ring/2' not published within 40ms");
}

TEST(AbortableRendezvousStoreTest, AbortEndsAWaitingGetWithItsStatus) {
  InMemoryRendezvousStore inner;
  RendezvousAbort abort;
  AbortableRendezvousStore store(&inner, &abort, kPoll);
  absl::Notification done;
  absl::StatusOr<std::string> got;
  std::thread waiter([&] {
    // Far longer than the test may take: only the abort ends it.
    got = store.Get("gloo/e0/ring/2", absl::Seconds(600));
    done.Notify();
  });
  const absl::Status lost = absl::UnavailableError("process 2 (127.0.0.1:4000) is lost (epoch 4)");
  EXPECT_TRUE(abort.Abort(lost));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  waiter.join();
  EXPECT_EQ(got.status(), lost);
  // The rendezvous is over: later calls fail alike, clean-up still runs.
  EXPECT_EQ(store.Set("gloo/e0/ring/0", "x").code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(inner.Set("gloo/e0/ring/0", "x").ok());
  EXPECT_EQ(store.Get("gloo/e0/ring/0", absl::Seconds(1)).status(), lost);
  EXPECT_EQ(*store.DeletePrefix("gloo/e0/"), 1);
  // The first abort's status stays.
  EXPECT_TRUE(abort.Abort(absl::UnavailableError("another")));
  EXPECT_THAT(std::string(abort.status().message()), HasSubstr("process 2"));
}

// A process that gave the call up publishes the watched key: a peer
// waiting for that process's entry fails with its words, not its timeout.
TEST(AbortableRendezvousStoreTest, TheWatchedKeyEndsAWaitingGetWithItsWords) {
  InMemoryRendezvousStore inner;
  RendezvousAbort abort;
  const std::string watched = GenerationAbandonedKey(3, "0,1,2", 0);
  EXPECT_EQ(watched, "abandoned/e3/s0,1,2/g0/why");
  AbortableRendezvousStore store(&inner, &abort, kPoll, watched);
  // Present keys pass through; an absent watched key changes nothing.
  ASSERT_TRUE(inner.Set("gloo/e3/s0,1,2/g0/p0,1/ring/0", "address").ok());
  EXPECT_EQ(*store.Get("gloo/e3/s0,1,2/g0/p0,1/ring/0", absl::Seconds(60)), "address");
  EXPECT_EQ(store.Get("gloo/e3/s0,1,2/g0/p0,1/ring/2", 4 * kPoll).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  absl::Notification done;
  absl::StatusOr<std::string> got;
  std::thread waiter([&] {
    // Far longer than the test may take: only the watched key ends it.
    got = store.Get("gloo/e3/s0,1,2/g0/p0,1/ring/1", absl::Seconds(600));
    done.Notify();
  });
  ASSERT_TRUE(inner.Set(watched, "process 1 gave up call 7: RESOURCE_EXHAUSTED: ...").ok());
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(60)));
  waiter.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), "process 1 gave up call 7: RESOURCE_EXHAUSTED: ...");
  // Another generation's rendezvous does not watch it.
  AbortableRendezvousStore next(&inner, &abort, kPoll, GenerationAbandonedKey(3, "0,1,2", 1));
  EXPECT_EQ(next.Get("gloo/e3/s0,1,2/g1/p0,1/ring/1", 4 * kPoll).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(AbortableRendezvousStoreTest, AnAbortAfterTheEndChangesNothing) {
  RendezvousAbort abort;
  EXPECT_TRUE(abort.End().ok());
  EXPECT_FALSE(abort.Abort(absl::UnavailableError("process 1 is lost (epoch 2)")));
  EXPECT_TRUE(abort.status().ok());
  RendezvousAbort first;
  ASSERT_TRUE(first.Abort(absl::UnavailableError("process 1 is lost (epoch 2)")));
  EXPECT_EQ(first.End().code(), absl::StatusCode::kUnavailable);
}

// The hook for waits outside the store (Gloo's connect) runs once, with the
// first abort's status, only while the rendezvous is neither aborted nor
// over.
TEST(AbortableRendezvousStoreTest, TheAbortHookRunsOnceWhileTheRendezvousIsOpen) {
  const absl::Status lost = absl::UnavailableError("process 2 is lost (epoch 3)");
  RendezvousAbort abort;
  std::vector<std::string> heard;
  ASSERT_TRUE(abort.OnAbort([&](const absl::Status& why) { heard.emplace_back(why.message()); }));
  EXPECT_TRUE(abort.Abort(lost));
  EXPECT_TRUE(abort.Abort(absl::UnavailableError("another")));
  EXPECT_THAT(heard, ::testing::ElementsAre(std::string(lost.message())));
  // Aborted already: nothing is kept (the caller fails at once).
  EXPECT_FALSE(abort.OnAbort([&](const absl::Status&) { heard.emplace_back("late"); }));
  EXPECT_EQ(heard.size(), 1u);

  // Over: the hook is dropped and a later abort does not run it.
  RendezvousAbort ended;
  ASSERT_TRUE(ended.OnAbort([&](const absl::Status&) { heard.emplace_back("after the end"); }));
  EXPECT_TRUE(ended.End().ok());
  EXPECT_FALSE(ended.Abort(lost));
  EXPECT_FALSE(ended.OnAbort([&](const absl::Status&) { heard.emplace_back("after the end"); }));
  EXPECT_EQ(heard.size(), 1u);
}

}  // namespace
}  // namespace placement::server
