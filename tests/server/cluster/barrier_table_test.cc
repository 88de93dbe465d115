#include "server/cluster/barrier_table.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

BarrierArrival At(int32_t p, std::string payload, std::string key = "",
                  absl::Duration timeout = absl::Seconds(10)) {
  BarrierArrival a;
  a.barrier_id = "b";
  a.process_index = p;
  a.participants = {0, 1, 2};
  a.payload = std::move(payload);
  a.timeout = timeout;
  a.sequence_key = std::move(key);
  return a;
}

TEST(BarrierTableTest, EveryoneLeavesWithEveryPayloadOneTokenAndATicket) {
  DeadlineTimer timer;
  BarrierTable table(&timer);
  std::vector<absl::StatusOr<BarrierResult>> results(3);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> threads;
    for (int p = 0; p < 3; ++p) {
      threads.emplace_back(
          [&, p] { results[p] = table.ArriveBlocking(At(p, "x" + std::to_string(p), "set")); });
    }
    for (auto& t : threads) t.join();
    for (int p = 0; p < 3; ++p) {
      ASSERT_TRUE(results[p].ok()) << results[p].status();
      EXPECT_EQ(results[p]->payloads, (std::vector<std::string>{"x0", "x1", "x2"}));
      EXPECT_EQ(results[p]->token, results[0]->token);
      EXPECT_EQ(results[p]->ticket, round);
    }
  }
  EXPECT_EQ(table.open_barriers(), 0);
}

TEST(BarrierTableTest, TimeoutsAndLostProcessesFailEveryWaiter) {
  DeadlineTimer timer;
  BarrierTable table(&timer);
  auto alone = table.ArriveBlocking(At(0, "", "", absl::Milliseconds(20)));
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(alone.status().message(), HasSubstr("process(es) 1, 2 did not arrive"));

  absl::StatusOr<BarrierResult> waiting;
  std::thread waiter([&] { waiting = table.ArriveBlocking(At(0, "")); });
  while (table.open_barriers() == 0) absl::SleepFor(absl::Milliseconds(1));
  table.OnMembershipChange(2, {{2, ProcessState::kLost}});
  waiter.join();
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waiting.status().message(),
              HasSubstr("process 2 is lost (missed its heartbeats: killed, crashed or cut off"));
  // While 2 is lost, arrivals naming it fail at once; tickets restart per epoch.
  EXPECT_EQ(table.ArriveBlocking(At(1, "")).status().code(), absl::StatusCode::kUnavailable);
  // A drained process is told apart from a lost one.
  table.OnMembershipChange(3, {{2, ProcessState::kLeft}});
  auto after_leave = table.ArriveBlocking(At(1, ""));
  EXPECT_EQ(after_leave.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(after_leave.status().message(),
              HasSubstr("process 2 left the cluster (drained; epoch 3)"));
  table.OnMembershipChange(4, {});
  EXPECT_EQ(table.ReportFailure("set", 0), 1);
  EXPECT_EQ(table.ReportFailure("set", 0), 1);  // once per generation
}

TEST(BarrierTableTest, RefusesInconsistentArrivals) {
  DeadlineTimer timer;
  BarrierTable table(&timer);
  BarrierArrival bad = At(5, "");
  EXPECT_EQ(table.ArriveBlocking(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = At(0, "");
  bad.participants = {1, 0};
  EXPECT_EQ(table.ArriveBlocking(bad).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<BarrierResult> first;
  std::thread t([&] { first = table.ArriveBlocking(At(0, "", "", absl::Milliseconds(300))); });
  while (table.open_barriers() == 0) absl::SleepFor(absl::Milliseconds(1));
  BarrierArrival other = At(1, "");
  other.participants = {0, 1};
  EXPECT_THAT(table.ArriveBlocking(other).status().message(),
              HasSubstr("the first arrival named [0,1,2]"));
  table.Shutdown();
  t.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
}

// A barrier of 1,000 participants, each arrival a callback (no thread
// waits): all leave with the same token and every payload; a lost
// participant fails another instance for every waiter at once.
TEST(BarrierTableTest, ThousandParticipantsWaitWithoutThreads) {
  DeadlineTimer timer;
  BarrierTable table(&timer);
  constexpr int kN = 1000;
  std::vector<int32_t> everyone(kN);
  for (int p = 0; p < kN; ++p) everyone[p] = p;
  std::vector<absl::StatusOr<BarrierResult>> results(kN, absl::UnknownError("pending"));
  std::atomic<int> ended{0};
  for (int p = 0; p < kN; ++p) {
    BarrierArrival a;
    a.barrier_id = "all";
    a.process_index = p;
    a.participants = everyone;
    a.payload = std::to_string(p);
    table.Arrive(a, [&, p](absl::StatusOr<BarrierResult> r) {
      results[p] = std::move(r);
      ++ended;
    });
    // Nobody leaves before the last arrival.
    EXPECT_EQ(ended.load(), p + 1 == kN ? kN : 0);
  }
  for (int p = 0; p < kN; ++p) {
    ASSERT_TRUE(results[p].ok()) << results[p].status();
    EXPECT_EQ(results[p]->token, results[0]->token);
    EXPECT_EQ(results[p]->payloads.size(), static_cast<size_t>(kN));
  }
  EXPECT_EQ(results[7]->payloads[7], "7");

  std::atomic<int> failed{0};
  for (int p = 0; p < kN - 1; ++p) {
    BarrierArrival a;
    a.barrier_id = "second";
    a.process_index = p;
    a.participants = everyone;
    table.Arrive(a, [&](absl::StatusOr<BarrierResult> r) {
      EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable);
      EXPECT_THAT(r.status().message(), HasSubstr("process 999"));
      ++failed;
    });
  }
  EXPECT_EQ(failed.load(), 0);
  table.OnMembershipChange(2, {{kN - 1, ProcessState::kLost}});
  EXPECT_EQ(failed.load(), kN - 1);
  EXPECT_EQ(table.open_barriers(), 0);
  EXPECT_EQ(timer.pending(), 0u);
}

}  // namespace
}  // namespace placement::server
