// ClusterEngine with P simulated processes in one test process
// (simulated_cluster.h): each process's Run on its own thread with the same
// ticket, over the gloo transport on loopback TCP; results checked against
// float64 / exact integer references. What the engine adds to its
// transport: ticket order, gaps, parallel sets, retired epochs, item
// checks, all-local items (call-ordered sets, forfeits and their notices
// are cluster_engine_call_order_test.cc's). What every transport must do (every kind, the
// numerics, staging, a lost peer, an abort) is the transport conformance
// suite (tests/conformance/transport_conformance_test.cc). Calls that must be
// waiting or inside the engine are detected through the `cancelled` poll,
// never by sleeping.

#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/local/local_engine.h"
#include "server/platform/cpu/cpu_backend.h"
#include "tests/server/collective/collective_test_util.h"

#if PLACEMENT_WITH_GLOO
#include "tests/server/collective/simulated_cluster.h"
#endif

namespace placement::server {
namespace {

#if PLACEMENT_WITH_GLOO

using testing::Decode;
using testing::ExpectResult;
using testing::Group;
using ::testing::HasSubstr;
using testing::ItemFor;
using testing::MakeGroup;
using testing::OnProcesses;
using testing::PollHook;
using testing::SimulatedCluster;
using testing::TestValues;
using testing::Ticket;

TEST(ClusterEngineTest, BroadcastInPlaceFromARootAmongSeveralLocalRanks) {
  SimulatedCluster c({2});
  Group g = MakeGroup(c, CollectiveKind::kBroadcast, DType::kF64, ReduceOp::kSum, {0, 1, 1, 0}, 64,
                      2, 11);
  // In place: every rank's send is its recv (the root's holds its values).
  for (int64_t r = 0; r < g.ranks(); ++r) {
    g.recv[r] = c.Buffer(g.devices[r], g.dtype, TestValues(g.dtype, g.count, 50 + r));
    if (r == g.root) {
      g.values[r] = TestValues(g.dtype, g.count, 50 + r);
      g.send[r].reset();
    }
  }
  const CrossProcessTicket ticket = Ticket("0,1", 0);
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    CollectiveItem item = ItemFor(g, p);
    for (RankBuffers& r : item.local) r.send = r.recv;
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(p).Run(CollectiveKind::kBroadcast, {&item, 1}, context);
  });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(g);
}

TEST(ClusterEngineTest, TicketsRunInTicketOrder) {
  // Ticket 1 (sum in place) is submitted first and must wait for ticket 0
  // (broadcast of rank 0's values in place): sum after broadcast gives
  // n * values[0]; the other order would give the broadcast of the sum.
  SimulatedCluster c({2});
  constexpr int64_t kCount = 16;
  const std::vector<int> layout = {0, 1, 0};
  std::vector<std::unique_ptr<DeviceBuffer>> x;
  std::vector<std::vector<double>> values;
  std::vector<int64_t> devices = {c.Device(0, 0), c.Device(1, 0), c.Device(0, 1)};
  for (int r = 0; r < 3; ++r) {
    values.push_back(TestValues(DType::kF32, kCount, 20 + r));
    x.push_back(c.Buffer(devices[r], DType::kF32, values[r]));
  }
  auto item_for = [&](int p, ReduceOp op) {
    CollectiveItem item{DType::kF32, op};
    item.group = devices;
    for (int r = 0; r < 3; ++r) {
      if (layout[r] == p) item.local.push_back(RankBuffers{r, x[r].get(), x[r].get()});
    }
    return item;
  };
  const CrossProcessTicket t0 = Ticket("0,1", 0), t1 = Ticket("0,1", 1);
  PollHook waiting[2];
  std::vector<absl::Status> late(2), early(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      CollectiveItem item = item_for(p, ReduceOp::kSum);
      CollectiveContext context;
      context.ticket = &t1;
      context.cancelled = waiting[p].Fn();
      late[p] = c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    });
  }
  for (int p = 0; p < 2; ++p) ASSERT_TRUE(waiting[p].WaitReached());
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      CollectiveItem item = item_for(p, ReduceOp::kSum);
      CollectiveContext context;
      context.ticket = &t0;
      early[p] = c.engine(p).Run(CollectiveKind::kBroadcast, {&item, 1}, context);
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(early[p].ok()) << early[p];
    ASSERT_TRUE(late[p].ok()) << late[p];
  }
  for (int r = 0; r < 3; ++r) {
    std::vector<double> want;
    for (double v : values[0]) want.push_back(3 * v);
    EXPECT_EQ(Decode(DType::kF32, x[r]->data(), kCount), want) << "rank " << r;
  }
}

TEST(ClusterEngineTest, MissingPredecessorIsSkippedAfterGapTimeout) {
  const absl::Duration kGap = absl::Milliseconds(150);
  SimulatedCluster c({.processes = 2, .gap_timeout = kGap});
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kI32, ReduceOp::kSum, {0, 1}, 10, 0, 1);
  const CrossProcessTicket t1 = Ticket("0,1", 1);
  const absl::Time start = absl::Now();
  auto statuses = RunGroup(c, g, {0, 1}, t1);
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_GE(absl::Now() - start, kGap);
  ExpectResult(g);
  // Ticket 0 arrives after its turn was skipped.
  const CrossProcessTicket t0 = Ticket("0,1", 0);
  CollectiveItem item = ItemFor(g, 0);
  CollectiveContext context;
  context.ticket = &t0;
  absl::Status late = c.engine(0).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition) << late;
  EXPECT_THAT(std::string(late.message()), HasSubstr("older than what already ran"));
}

TEST(ClusterEngineTest, DifferentSetsRunInParallel) {
  // Process 0 enters set A first and blocks there until process 1 joins;
  // process 1 joins A only after set B completed on both. Serialising the
  // sets on process 0 would deadlock until the timeout.
  SimulatedCluster c({2});
  Group a = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF64, ReduceOp::kSum, {0, 1}, 9, 0, 1);
  Group b = MakeGroup(c, CollectiveKind::kAllGather, DType::kI32, ReduceOp::kSum, {1, 0}, 9, 0, 2);
  const CrossProcessTicket ta = Ticket("A", 0), tb = Ticket("B", 0);
  auto run = [&](Group& g, CollectiveKind kind, int p, const CrossProcessTicket& t,
                 std::function<bool()> cancelled) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &t;
    context.cancelled = std::move(cancelled);
    return c.engine(p).Run(kind, {&item, 1}, context);
  };
  PollHook in_a;
  absl::Status a0;
  std::thread first([&] { a0 = run(a, CollectiveKind::kAllReduce, 0, ta, in_a.Fn()); });
  ASSERT_TRUE(in_a.WaitReached());
  for (const auto& s : OnProcesses(
           {0, 1}, [&](int p) { return run(b, CollectiveKind::kAllGather, p, tb, nullptr); })) {
    EXPECT_TRUE(s.ok()) << s;
  }
  absl::Status a1 = run(a, CollectiveKind::kAllReduce, 1, ta, nullptr);
  first.join();
  EXPECT_TRUE(a0.ok()) << a0;
  EXPECT_TRUE(a1.ok()) << a1;
  ExpectResult(a);
  ExpectResult(b);
}

TEST(ClusterEngineTest, DropEpochsBeforeFreesContextsAndRetiresTickets) {
  SimulatedCluster c({.processes = 2, .gap_timeout = absl::Seconds(30)});
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kI32, ReduceOp::kMean, {0, 1}, 4, 0, 3);
  auto run = [&](int p, const CrossProcessTicket& ticket, std::function<bool()> cancelled) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    context.cancelled = std::move(cancelled);
    return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  };
  const CrossProcessTicket e0 = Ticket("0,1", 0, 0, /*epoch=*/0);
  for (const auto& s : OnProcesses({0, 1}, [&](int p) { return run(p, e0, nullptr); })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  EXPECT_EQ(c.engine(0).cached_contexts(), 1u);
  // A ticket of epoch 1 waits for its predecessors when the epoch retires.
  const CrossProcessTicket waiting = Ticket("0,1", 5, 0, /*epoch=*/1);
  PollHook hook;
  absl::Status waited;
  std::thread t([&] { waited = run(0, waiting, hook.Fn()); });
  ASSERT_TRUE(hook.WaitReached());
  for (int p = 0; p < 2; ++p) c.engine(p).DropEpochsBefore(2);
  t.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kFailedPrecondition) << waited;
  EXPECT_EQ(c.engine(0).cached_contexts(), 0u);
  absl::Status old = run(0, Ticket("0,1", 1, 0, /*epoch=*/0), nullptr);
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition) << old;
  EXPECT_THAT(std::string(old.message()), HasSubstr("retired"));
  const CrossProcessTicket e2 = Ticket("0,1", 0, 0, /*epoch=*/2);
  for (const auto& s : OnProcesses({0, 1}, [&](int p) { return run(p, e2, nullptr); })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ExpectResult(g);
}

TEST(ClusterEngineTest, RejectsInvalidItemsWithoutBlockingTheTicketOrder) {
  // A long gap timeout: an invalid call must not leave a gap behind it.
  SimulatedCluster c({.processes = 2, .gap_timeout = absl::Seconds(30)});
  const int64_t d00 = c.Device(0, 0), d01 = c.Device(0, 1), d10 = c.Device(1, 0);
  auto b16 = c.Garbage(d00, 16), c16 = c.Garbage(d00, 16), b12 = c.Garbage(d00, 12);
  auto e16 = c.Garbage(d01, 16), f16 = c.Garbage(d01, 16), b0 = c.Garbage(d00, 0);
  // Empty blocks fit the size table of every kind.
  auto z0 = c.Garbage(d00, 0), z1 = c.Garbage(d00, 0), z2 = c.Garbage(d01, 0),
       z3 = c.Garbage(d01, 0);
  CollectiveItem valid{DType::kF32, ReduceOp::kSum};
  valid.group = {d00, d01};
  valid.local = {{0, z0.get(), z1.get()}, {1, z2.get(), z3.get()}};
  struct Case {
    CollectiveKind kind;
    CollectiveItem item;
    std::string message;
  };
  auto spanning = [&](DType dtype = DType::kF32) {
    CollectiveItem item{dtype, ReduceOp::kSum};
    item.group = {d00, d10};
    item.local = {{0, b16.get(), c16.get()}};
    return item;
  };
  std::vector<Case> cases;
  {
    CollectiveItem item = spanning();
    item.local.push_back({1, e16.get(), f16.get()});
    cases.push_back({CollectiveKind::kAllReduce, item,
                     "item 1: rank 1 is device 1024 on process 1, not on this process (0)"});
  }
  {
    CollectiveItem item = spanning();
    item.local.push_back(item.local[0]);
    cases.push_back({CollectiveKind::kAllReduce, item, "item 1: rank 0 listed twice"});
  }
  {
    CollectiveItem item = spanning();
    item.group = {d00, d10, d01};
    cases.push_back({CollectiveKind::kAllReduce, item,
                     "item 1: rank 2 is device 1 on this process but has no contribution"});
  }
  {
    CollectiveItem item = spanning();
    item.local[0].recv = b12.get();
    cases.push_back({CollectiveKind::kAllReduce, item, "item 1: recv[0] is 12 bytes, expected 16"});
  }
  {
    CollectiveItem item = spanning();
    item.local[0].recv = f16.get();
    cases.push_back({CollectiveKind::kAllReduce, item,
                     "item 1: recv[0] is on device 1 but rank 0 of the group is device 0"});
  }
  {
    CollectiveItem item = spanning();
    cases.push_back(
        {CollectiveKind::kReduceScatter, item, "item 1: send[0] is 16 bytes, expected 32"});
  }
  {
    // Only an empty block passes the size table with recv == send.
    CollectiveItem item = spanning();
    item.local[0].send = b0.get();
    item.local[0].recv = b0.get();
    cases.push_back({CollectiveKind::kReduceScatter, item,
                     "item 1: recv[0] is send[0]; reduce_scatter cannot run in place"});
  }
  cases.push_back({CollectiveKind::kAllReduce, spanning(DType::kBool),
                   "item 1: dtype bool cannot be reduced with sum"});
  {
    CollectiveItem item = spanning();
    item.root = 2;
    cases.push_back({CollectiveKind::kBroadcast, item, "item 1: root rank 2 outside [0, 2)"});
  }
  {
    CollectiveItem item = spanning();
    item.group = {d00, 7 * kMaxLocalDevices};
    cases.push_back(
        {CollectiveKind::kAllReduce, item, "item 1: rank 1 is device 7168, which no process owns"});
  }
  {
    CollectiveItem item = spanning();
    item.group = {d10, d10 + 1};
    item.local.clear();
    cases.push_back({CollectiveKind::kAllReduce, item,
                     "item 1: the group spans processes 1 but none of its ranks is on this "
                     "process (0)"});
  }
  const absl::Time start = absl::Now();
  uint64_t next_ticket = 0;
  for (const Case& k : cases) {
    const CollectiveItem items[2] = {valid, k.item};
    const CrossProcessTicket ticket = Ticket("0,1", next_ticket++);
    CollectiveContext context;
    context.ticket = &ticket;
    absl::Status s = c.engine(0).Run(k.kind, items, context);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << k.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(k.message));
  }
  // Without a ticket, a spanning item is refused; all-local ones run.
  CollectiveItem span = spanning();
  absl::Status untagged = c.engine(0).Run(CollectiveKind::kAllReduce, {&span, 1}, {});
  EXPECT_EQ(untagged.code(), absl::StatusCode::kFailedPrecondition) << untagged;
  EXPECT_THAT(std::string(untagged.message()), HasSubstr("needs a CrossProcessTicket"));
  EXPECT_TRUE(c.engine(0).Run(CollectiveKind::kAllReduce, {&valid, 1}, {}).ok());
  // The invalid tickets counted as finished: the next one runs at once.
  const CrossProcessTicket ticket = Ticket("0,1", next_ticket++);
  CollectiveContext context;
  context.ticket = &ticket;
  EXPECT_TRUE(c.engine(0).Run(CollectiveKind::kAllReduce, {&valid, 1}, context).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ClusterEngineTest, RejectsBadOptions) {
  LocalEngine local;
  ClusterEngineOptions options;
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.local = &local;
  options.process_of = [](int64_t) { return 0; };
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.timeout = absl::Seconds(1);
  options.process_index = -1;
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ClusterEngineTest, WithoutATransportSpanningItemsAreRefused) {
  // A build without a cross-process transport: all-local items still run.
  LocalEngine local;
  auto backend = *CpuBackend::Create({});
  ClusterEngineOptions options;
  options.local = &local;
  options.process_of = [](int64_t id) { return static_cast<int32_t>(id / kMaxLocalDevices); };
  auto engine = ClusterEngine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto send = *backend->Allocate(0, 16);
  auto recv = *backend->Allocate(0, 16);
  CollectiveItem item{DType::kF32, ReduceOp::kSum};
  item.group = {0, kMaxLocalDevices};
  item.local = {{0, send.get(), recv.get()}};
  const CrossProcessTicket ticket = Ticket("0,1", 0);
  CollectiveContext context;
  context.ticket = &ticket;
  absl::Status s = (*engine)->Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("no cross-process transport"));
}

#else

TEST(ClusterEngineTest, NotBuilt) {
  GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)";
}

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
