#include "server/service/call_gate.h"

#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

TEST(CallGateTest, CountsTicketsAndRefusesWhileDraining) {
  CallGate gate;
  {
    CallGate::Ticket a, b;
    ASSERT_TRUE(gate.Enter(&a).ok());
    ASSERT_TRUE(gate.Enter(&b).ok());
    EXPECT_EQ(gate.in_flight(), 2);
    CallGate::Ticket moved = std::move(a);
    EXPECT_EQ(gate.in_flight(), 2);
    EXPECT_FALSE(a.held());
  }
  EXPECT_EQ(gate.in_flight(), 0);
  gate.StartDraining();
  CallGate::Ticket c;
  absl::Status status = gate.Enter(&c);
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(c.held());
  EXPECT_TRUE(gate.WaitIdle(absl::Now()));
}

TEST(CallGateTest, WaitIdleWaitsForInFlightCalls) {
  CallGate gate;
  auto ticket = std::make_unique<CallGate::Ticket>();
  ASSERT_TRUE(gate.Enter(ticket.get()).ok());
  gate.StartDraining();
  EXPECT_FALSE(gate.WaitIdle(absl::Now() + absl::Milliseconds(20)));
  std::thread release([&] { ticket.reset(); });
  EXPECT_TRUE(gate.WaitIdle(absl::Now() + absl::Seconds(30)));
  release.join();
}

}  // namespace
}  // namespace placement::server
