#include "server/cluster/barrier_table.h"

#include <thread>

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
  BarrierTable table;
  std::vector<absl::StatusOr<BarrierResult>> results(3);
  for (int round = 0; round < 2; ++round) {
    std::vector<std::thread> threads;
    for (int p = 0; p < 3; ++p) {
      threads.emplace_back(
          [&, p] { results[p] = table.Arrive(At(p, "x" + std::to_string(p), "set")); });
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
  BarrierTable table;
  auto alone = table.Arrive(At(0, "", "", absl::Milliseconds(20)));
  EXPECT_EQ(alone.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(alone.status().message(), HasSubstr("process(es) 1, 2 did not arrive"));

  absl::StatusOr<BarrierResult> waiting;
  std::thread waiter([&] { waiting = table.Arrive(At(0, "")); });
  while (table.open_barriers() == 0) absl::SleepFor(absl::Milliseconds(1));
  table.OnMembershipChange(2, {2});
  waiter.join();
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(waiting.status().message(), HasSubstr("process 2 left the cluster"));
  // While 2 is lost, arrivals naming it fail at once; tickets restart per epoch.
  EXPECT_EQ(table.Arrive(At(1, "")).status().code(), absl::StatusCode::kUnavailable);
  table.OnMembershipChange(3, {});
  EXPECT_EQ(table.ReportFailure("set", 0), 1);
  EXPECT_EQ(table.ReportFailure("set", 0), 1);  // once per generation
}

TEST(BarrierTableTest, RefusesInconsistentArrivals) {
  BarrierTable table;
  BarrierArrival bad = At(5, "");
  EXPECT_EQ(table.Arrive(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = At(0, "");
  bad.participants = {1, 0};
  EXPECT_EQ(table.Arrive(bad).status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<BarrierResult> first;
  std::thread t([&] { first = table.Arrive(At(0, "", "", absl::Milliseconds(300))); });
  while (table.open_barriers() == 0) absl::SleepFor(absl::Milliseconds(1));
  BarrierArrival other = At(1, "");
  other.participants = {0, 1};
  EXPECT_THAT(table.Arrive(other).status().message(), HasSubstr("the first arrival named [0,1,2]"));
  table.Shutdown();
  t.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace placement::server
