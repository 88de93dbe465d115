// ClusterEngine with P simulated processes in one test process
// (simulated_cluster.h): each process's Run on its own thread with the same
// ticket, over real Gloo on loopback TCP; results checked against float64 /
// exact integer references. Calls that must be waiting or inside the engine
// are detected through the `cancelled` poll, never by sleeping.
#include <signal.h>

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

// As placementd's main does: a "process" whose peer closed its Gloo
// connections mid-call must see the write fail (EPIPE), not be killed by
// SIGPIPE -- these processes share one test binary.
const bool kSigpipeIgnored = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

#if PLACEMENT_WITH_GLOO

using testing::AllProcesses;
using ::testing::AnyOf;
using testing::ClusterOptions;
using testing::Decode;
using testing::ExpectResult;
using testing::Group;
using ::testing::HasSubstr;
using testing::ItemFor;
using testing::ItemsFor;
using testing::Label;
using testing::MakeGroup;
using testing::OnProcesses;
using testing::PollHook;
using testing::SimulatedCluster;
using testing::TestValues;
using testing::Ticket;

// Every kind x {f32, f64, bf16, i32} x {SUM, MEAN, MAX} (reductions), with
// the groups of each kind in ONE call per kind: items on different subsets,
// uneven and interleaved layouts, and one all-local item.
void RunMatrix(int processes, const std::vector<std::vector<int>>& layouts) {
  SimulatedCluster c({processes});
  const std::vector<int> all = AllProcesses(c);
  uint64_t next_ticket = 0;
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                              CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast}) {
    const bool reduces =
        kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
    std::vector<Group> groups;
    int index = 0;
    for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kI32}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
        if (!reduces && op != ReduceOp::kSum) continue;
        const std::vector<int>& layout = layouts[index % layouts.size()];
        const int64_t count = std::vector<int64_t>{37, 1, 300}[index % 3];
        const int32_t root = static_cast<int32_t>(index % layout.size());
        groups.push_back(MakeGroup(c, kind, dtype, op, layout, count, root,
                                   static_cast<uint32_t>(100 * index + 1)));
        ++index;
      }
    }
    groups.push_back(MakeGroup(c, kind, DType::kF32, ReduceOp::kMean, {0, 0}, 5, 1, 7));
    const CrossProcessTicket ticket = Ticket(c.AllKey(), next_ticket++);
    auto statuses = OnProcesses(all, [&](int p) {
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Run(kind, ItemsFor(groups, p), context);
    });
    for (int p : all) ASSERT_TRUE(statuses[p].ok()) << "process " << p << ": " << statuses[p];
    for (const Group& g : groups) ExpectResult(g);
  }
  EXPECT_THAT(c.failures(), ::testing::IsEmpty());
}

TEST(ClusterEngineTest, EveryKindTwoProcesses) {
  // 3 + 1 interleaved, 1 + 1 with process 1 first, 2 + 3 contiguous.
  RunMatrix(2, {{0, 1, 0, 0}, {1, 0}, {0, 0, 1, 1, 1}});
}

TEST(ClusterEngineTest, EveryKindFourProcesses) {
  // k = 3, 1, 2, 1 interleaved; subset {1, 3}; subset {1, 2, 3} uneven;
  // one rank per process in order.
  RunMatrix(4, {{2, 0, 1, 0, 3, 0, 2}, {3, 1}, {3, 2, 1, 1}, {0, 1, 2, 3}});
}

TEST(ClusterEngineTest, HalfFloatsAccumulateInF32AndIntegerMeansInI64) {
  // bf16 SUM of 256 + 1 + 1 + 1 = 259, rounded once: 260. Rounding every
  // partial sum to bf16 (spacing 2 above 256) would give 256. i8 / i32 MEAN
  // of values whose sum overflows the dtype: exact in i64.
  SimulatedCluster c({2});
  struct Case {
    DType dtype;
    ReduceOp op;
    std::vector<double> per_rank;
    double want;
  };
  const std::vector<Case> cases = {
      {DType::kBF16, ReduceOp::kSum, {256, 1, 1, 1}, 260},
      {DType::kF16, ReduceOp::kSum, {2048, 1, 1, 1}, 2052},  // f16 spacing 2 above 2048
      {DType::kBF16, ReduceOp::kMean, {256, 1, 1, 1}, 65},   // 64.75 to even
      {DType::kI8, ReduceOp::kMean, {100, 100, 100, -1}, 74},
      {DType::kI32, ReduceOp::kMean, {2147483647, 2147483647, 2147483647, 2147483647}, 2147483647},
      {DType::kI32, ReduceOp::kMean, {-7, 0, 0, 0}, -1},  // truncates toward zero
  };
  const std::vector<int> layout = {0, 0, 1, 1};
  std::vector<Group> groups;
  for (const Case& k : cases) {
    Group g = MakeGroup(c, CollectiveKind::kAllReduce, k.dtype, k.op, layout, 3, 0, 1);
    for (int r = 0; r < 4; ++r) {
      g.values[r] = std::vector<double>(3, k.per_rank[r]);
      g.send[r] = c.Buffer(g.devices[r], k.dtype, g.values[r]);
    }
    groups.push_back(std::move(g));
  }
  const CrossProcessTicket ticket = Ticket("0,1", 0);
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(p).Run(CollectiveKind::kAllReduce, ItemsFor(groups, p), context);
  });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int r = 0; r < 4; ++r) {
      EXPECT_EQ(Decode(cases[i].dtype, groups[i].recv[r]->data(), 3),
                std::vector<double>(3, cases[i].want))
          << Label(groups[i]) << " rank " << r;
    }
  }
}

TEST(ClusterEngineTest, StagesThroughNonHostAddressableBackend) {
  SimulatedCluster c({.processes = 2, .staged = true});
  uint64_t next_ticket = 0;
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                              CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast}) {
    std::vector<Group> groups;
    groups.push_back(MakeGroup(c, kind, DType::kBF16, ReduceOp::kMean, {1, 0, 0}, 33, 2, 3));
    groups.push_back(MakeGroup(c, kind, DType::kI32, ReduceOp::kSum, {0, 1, 1}, 8, 1, 5));
    const CrossProcessTicket ticket = Ticket("0,1", next_ticket++);
    auto statuses = OnProcesses({0, 1}, [&](int p) {
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Run(kind, ItemsFor(groups, p), context);
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    for (const Group& g : groups) ExpectResult(g);
  }
  for (int p = 0; p < 2; ++p) {
    EXPECT_GT(c.staged(p).reads(), 0);
    EXPECT_GT(c.staged(p).writes(), 0);
  }
}

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
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &t1;
    return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  });
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

TEST(ClusterEngineTest, AbsentProcessTimesOutAndNextGenerationWorks) {
  const absl::Duration kTimeout = absl::Seconds(1);
  SimulatedCluster c({.processes = 2, .timeout = kTimeout, .gap_timeout = absl::Milliseconds(100)});
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kMax, {0, 1, 1}, 20, 0, 4);
  auto run = [&](int p, const CrossProcessTicket& ticket) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  };
  // Process 1 never shows up for ticket 0.
  absl::Time start = absl::Now();
  absl::Status lonely = run(0, Ticket("0,1", 0));
  EXPECT_EQ(lonely.code(), absl::StatusCode::kDeadlineExceeded) << lonely;
  EXPECT_THAT(std::string(lonely.message()), HasSubstr("gloo/e0/s0,1/g0/p0,1"));
  EXPECT_LT(absl::Now() - start, kTimeout + absl::Seconds(2));
  EXPECT_EQ(c.engine(0).cached_contexts(), 0u);
  ASSERT_EQ(c.failures().size(), 1u);
  EXPECT_EQ(c.failures()[0].ticket, 0u);
  // The failed generation is refused at once rather than re-rendezvoused.
  start = absl::Now();
  absl::Status stale = run(0, Ticket("0,1", 1));
  EXPECT_EQ(stale.code(), absl::StatusCode::kUnavailable) << stale;
  EXPECT_THAT(std::string(stale.message()), HasSubstr("needs a new generation"));
  EXPECT_LT(absl::Now() - start, kTimeout);
  // The cluster bumped the generation: ticket 2 works (process 1 skips the
  // tickets it never received after the gap timeout).
  const CrossProcessTicket t2 = Ticket("0,1", 2, /*generation=*/1);
  auto statuses = OnProcesses({0, 1}, [&](int p) { return run(p, t2); });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(g);
  EXPECT_EQ(c.engine(0).cached_contexts(), 1u);
  EXPECT_EQ(c.engine(1).cached_contexts(), 1u);
}

TEST(ClusterEngineTest, PeerDestroyedMidCallFailsTheOthersWithoutHanging) {
  const absl::Duration kTimeout = absl::Seconds(3);
  SimulatedCluster c({.processes = 3, .timeout = kTimeout});
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2, 0},
                      1000, 0, 8);
  auto run = [&](int p, const CrossProcessTicket& ticket, std::function<bool()> cancelled) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    context.cancelled = std::move(cancelled);
    return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  };
  const CrossProcessTicket t0 = Ticket("0,1,2", 0);
  for (const auto& s : OnProcesses({0, 1, 2}, [&](int p) { return run(p, t0, nullptr); })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  // Processes 0 and 1 start ticket 1; once both are in the call, 2 dies.
  const CrossProcessTicket t1 = Ticket("0,1,2", 1);
  PollHook in_call[2];
  std::vector<absl::Status> statuses(2);
  const absl::Time start = absl::Now();
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] { statuses[p] = run(p, t1, in_call[p].Fn()); });
  }
  for (int p = 0; p < 2; ++p) ASSERT_TRUE(in_call[p].WaitReached());
  c.Kill(2);
  for (auto& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_THAT(statuses[p].code(),
                AnyOf(absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded))
        << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("over processes 0,1,2"));
    EXPECT_EQ(c.engine(p).cached_contexts(), 0u);
  }
  EXPECT_LT(absl::Now() - start, kTimeout + absl::Seconds(3));
  EXPECT_EQ(c.failures().size(), 2u);
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
  InMemoryRendezvousStore store;
  LocalEngine local;
  auto backend = *CpuBackend::Create({});
  ClusterEngineOptions options;
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.local = &local;
  options.backend = backend.get();
  options.store = &store;
  options.process_of = [](int64_t) { return 0; };
  options.timeout = absl::ZeroDuration();
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.timeout = absl::Seconds(1);
  options.hostname = "no-such-host.invalid";
  EXPECT_EQ(ClusterEngine::Create(options).status().code(), absl::StatusCode::kUnavailable);
}

#else

TEST(ClusterEngineTest, NotBuilt) {
  GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)";
}

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
