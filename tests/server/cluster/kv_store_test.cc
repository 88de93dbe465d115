#include "server/cluster/kv_store.h"

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(KvStoreTest, GetWaitsForTheKey) {
  DeadlineTimer timer;
  KvStore kv(&timer);
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = kv.GetBlocking("gloo/a", absl::Seconds(10)); });
  ASSERT_TRUE(kv.Set("gloo/a", "addr").ok());
  reader.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, "addr");
  EXPECT_EQ(kv.GetBlocking("missing", absl::Milliseconds(10)).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(KvStoreTest, BoundsPrefixesAndShutdown) {
  DeadlineTimer timer;
  KvStore kv(&timer);
  EXPECT_EQ(kv.Set("", "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.Set("k", std::string(KvStore::kMaxValueBytes + 1, 'x')).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(kv.Set("p/1", "a").ok());
  ASSERT_TRUE(kv.Set("p/2", "b").ok());
  ASSERT_TRUE(kv.Set("q", "c").ok());
  EXPECT_EQ(kv.DeletePrefix("p/"), 2);
  EXPECT_EQ(kv.size(), 1);
  absl::StatusOr<std::string> got;
  std::thread reader([&] { got = kv.GetBlocking("never", absl::Seconds(30)); });
  absl::SleepFor(absl::Milliseconds(20));
  kv.Shutdown();
  reader.join();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
}

// Thousands of waiting gets hold no thread: one Set ends them all, and
// those for other keys end at their timeouts.
TEST(KvStoreTest, ManyWaitingGetsHoldNoThread) {
  DeadlineTimer timer;
  KvStore kv(&timer);
  constexpr int kWaiters = 5000;
  std::atomic<int> got{0};
  std::atomic<int> timed_out{0};
  absl::Notification all_done;
  auto count = [&](bool value) {
    return [&, value](absl::StatusOr<std::string> r) {
      if (value) {
        EXPECT_TRUE(r.ok());
        if (r.ok()) EXPECT_EQ(*r, "addr");
        ++got;
      } else {
        EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
        ++timed_out;
      }
      if (got + timed_out == 2 * kWaiters) all_done.Notify();
    };
  };
  for (int i = 0; i < kWaiters; ++i) {
    kv.Get("gloo/ctx", absl::Seconds(60), count(true));
    kv.Get("never/" + std::to_string(i), absl::Milliseconds(20), count(false));
  }
  // Every 60 s get still waits; some 20 ms ones may have ended already (a
  // timed-out get leaves the store before its callback counts it).
  const int waiting = kv.waiting();
  EXPECT_GE(waiting, kWaiters);
  EXPECT_LE(waiting, 2 * kWaiters);
  ASSERT_TRUE(kv.Set("gloo/ctx", "addr").ok());
  all_done.WaitForNotification();
  EXPECT_EQ(got.load(), kWaiters);
  EXPECT_EQ(timed_out.load(), kWaiters);
  EXPECT_EQ(kv.waiting(), 0);
  EXPECT_EQ(timer.pending(), 0u);
}

}  // namespace
}  // namespace placement::server
