// Cross-process transport conformance: the same cluster scenarios on every
// registered CrossProcessTransport (TransportRegistry; "gloo" everywhere,
// others where the build has them), each through the ClusterEngine of 2-8
// simulated processes (tests/server/collective/simulated_cluster.h: per
// process a CpuBackend, a LocalEngine, the transport and a ClusterEngine,
// over real TCP on loopback): every collective kind and the reduction
// numerics against float64 / exact integer references (also over 5 and 8
// processes, where a ring transport connects only neighbours), broadcasts
// from every root, device buffers staged through a backend that is not
// host-addressable, a process absent from a rendezvous (also one declared
// lost meanwhile: AbortProcess ends the others' rendezvous), a peer lost
// mid-call, an abort (Forfeit, AbortProcess) that fails the peers inside
// the call at once -- over 8 processes also those that are not the aborted
// process's neighbours --, a rendezvous over a file store, and the
// transport's own option checks. Calls that must be inside the engine
// are detected through the `cancelled` poll, never by sleeping.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/transport/transport_registry.h"
#include "server/platform/cpu/cpu_backend.h"
#include "tests/server/collective/collective_test_util.h"
#include "tests/server/collective/simulated_cluster.h"

namespace placement::server {
namespace {

// As placementd's main does: a "process" whose peer closed its connections
// mid-call must see the write fail (EPIPE), not be killed by SIGPIPE --
// these processes share one test binary.
const bool kSigpipeIgnored = [] {
  signal(SIGPIPE, SIG_IGN);
  return true;
}();

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
using testing::Ticket;

class TransportConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  ClusterOptions Options(int processes) const {
    ClusterOptions options;
    options.processes = processes;
    options.transport = GetParam();
    return options;
  }

  // Every kind x {f32, f64, bf16, i32} x {SUM, MEAN, MAX} (reductions),
  // with the groups of each kind in ONE call per kind: items on different
  // subsets, uneven and interleaved layouts, and one all-local item.
  void RunMatrix(int processes, const std::vector<std::vector<int>>& layouts) {
    SimulatedCluster c(Options(processes));
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
};

// An all-reduce over processes 0 and 1 alone (ticket 0 of set "0,1") runs
// on both and gives the computed result.
void ExpectPairOfZeroAndOneRuns(SimulatedCluster& c, uint32_t seed) {
  Group pair =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 100, 0, seed);
  const CrossProcessTicket t = Ticket("0,1", 0);
  for (const auto& s : OnProcesses({0, 1}, [&](int p) {
         CollectiveItem item = ItemFor(pair, p);
         CollectiveContext context;
         context.ticket = &t;
         return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
       })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ExpectResult(pair);
}

TEST_P(TransportConformanceTest, EveryKindTwoProcesses) {
  // 3 + 1 interleaved, 1 + 1 with process 1 first, 2 + 3 contiguous.
  RunMatrix(2, {{0, 1, 0, 0}, {1, 0}, {0, 0, 1, 1, 1}});
}

TEST_P(TransportConformanceTest, EveryKindThreeProcesses) {
  // One rank each; 2 + 1 + 1 interleaved; subset {0, 2}.
  RunMatrix(3, {{0, 1, 2}, {1, 0, 2, 0}, {2, 0}});
}

TEST_P(TransportConformanceTest, EveryKindFourProcesses) {
  // k = 3, 1, 2, 1 interleaved; subset {1, 3}; subset {1, 2, 3} uneven;
  // one rank per process in order.
  RunMatrix(4, {{2, 0, 1, 0, 3, 0, 2}, {3, 1}, {3, 2, 1, 1}, {0, 1, 2, 3}});
}

// From 4 processes on a ring transport connects each process only to its
// two neighbours: every kind must still reach every process.
TEST_P(TransportConformanceTest, EveryKindFiveProcesses) {
  // One rank each; k = 2, 1, 1, 1, 2 interleaved; subset {1, 3, 4}; a
  // subset of 4 with process 4 first.
  RunMatrix(5, {{0, 1, 2, 3, 4}, {4, 0, 2, 1, 3, 0, 4}, {3, 1, 4}, {4, 0, 1, 2}});
}

TEST_P(TransportConformanceTest, EveryKindEightProcesses) {
  // One rank each, in and against process order; uneven interleaved;
  // subset of 5.
  RunMatrix(8, {{0, 1, 2, 3, 4, 5, 6, 7},
                {7, 6, 5, 4, 3, 2, 1, 0},
                {0, 2, 4, 6, 1, 3, 5, 7, 0, 7},
                {6, 1, 3, 2, 5}});
}

// A broadcast from each process's rank over 5 and 8 processes (on a ring
// the bytes pass every process), and one of 3 MiB + 4 bytes that crosses in
// several chunks.
TEST_P(TransportConformanceTest, BroadcastFromEveryRoot) {
  for (int processes : {5, 8}) {
    SimulatedCluster c(Options(processes));
    const std::vector<int> all = AllProcesses(c);
    std::vector<Group> groups;
    for (int root = 0; root < processes; ++root) {
      groups.push_back(MakeGroup(c, CollectiveKind::kBroadcast, DType::kI32, ReduceOp::kSum, all,
                                 1 + 7 * root, root, static_cast<uint32_t>(50 + root)));
    }
    // Two ranks on process 2 and the root on process 3: root position 3.
    groups.push_back(MakeGroup(c, CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum,
                               {2, 0, 2, 1, 3, 4}, (3 << 18) + 1, 4, 77));
    const CrossProcessTicket ticket = Ticket(c.AllKey(), 0);
    auto statuses = OnProcesses(all, [&](int p) {
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Run(CollectiveKind::kBroadcast, ItemsFor(groups, p), context);
    });
    for (int p : all) ASSERT_TRUE(statuses[p].ok()) << "process " << p << ": " << statuses[p];
    for (const Group& g : groups) ExpectResult(g);
  }
}

TEST_P(TransportConformanceTest, HalfFloatsAccumulateInF32AndIntegerMeansInI64) {
  // bf16 SUM of 256 + 1 + 1 + 1 = 259, rounded once: 260. Rounding every
  // partial sum to bf16 (spacing 2 above 256) would give 256. i8 / i32 MEAN
  // of values whose sum overflows the dtype: exact in i64.
  SimulatedCluster c(Options(2));
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

TEST_P(TransportConformanceTest, StagesThroughNonHostAddressableBackend) {
  ClusterOptions options = Options(2);
  options.staged = true;
  SimulatedCluster c(options);
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

TEST_P(TransportConformanceTest, AbsentProcessTimesOutAndNextGenerationWorks) {
  const absl::Duration kTimeout = absl::Seconds(1);
  ClusterOptions options = Options(2);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Milliseconds(100);
  SimulatedCluster c(options);
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kMax, {0, 1, 1}, 20, 0, 4);
  auto run = [&](int p, const CrossProcessTicket& ticket) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  };
  // Process 1 never shows up for ticket 0: the rendezvous names the group.
  absl::Time start = absl::Now();
  absl::Status lonely = run(0, Ticket("0,1", 0));
  EXPECT_EQ(lonely.code(), absl::StatusCode::kDeadlineExceeded) << lonely;
  EXPECT_THAT(std::string(lonely.message()),
              HasSubstr(TransportGroupKey{0, "0,1", 0, {0, 1}}.Name()));
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

// All-reduces of `g` on the set of every process of `c`: FirstOnAll
// connects the set's group (ticket 0 on every process); Enter starts ticket
// 1 on the `entering` processes and returns once each is inside the call
// (each polled `cancelled` once), leaving the others out of it; Join waits
// for them and returns their statuses, in the order of `entering`.
class PartialCall {
 public:
  PartialCall(SimulatedCluster& c, const Group& g, std::vector<int> entering)
      : c_(c), g_(g), entering_(std::move(entering)), hooks_(entering_.size()) {}
  ~PartialCall() { Join(); }

  absl::Status Run(int p, const CrossProcessTicket& ticket, std::function<bool()> cancelled) {
    CollectiveItem item = ItemFor(g_, p);
    CollectiveContext context;
    context.ticket = &ticket;
    context.cancelled = std::move(cancelled);
    return c_.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  }
  void FirstOnAll() {
    for (const auto& s :
         OnProcesses(AllProcesses(c_), [&](int p) { return Run(p, first_, nullptr); })) {
      ASSERT_TRUE(s.ok()) << s;
    }
  }
  void Enter() {
    for (size_t i = 0; i < entering_.size(); ++i) {
      threads_.emplace_back([this, i] {
        statuses_[i] = Run(entering_[i], second_, hooks_[i].Fn());
        ended_[i] = absl::Now();
      });
    }
    for (PollHook& hook : hooks_) ASSERT_TRUE(hook.WaitReached());
  }
  const std::vector<absl::Status>& Join() {
    for (auto& t : threads_) t.join();
    threads_.clear();
    return statuses_;
  }
  // When each entering process's call returned (after Join).
  const std::vector<absl::Time>& ended() const { return ended_; }
  const CrossProcessTicket& second() const { return second_; }

 private:
  SimulatedCluster& c_;
  const Group& g_;
  const std::vector<int> entering_;
  const CrossProcessTicket first_ = Ticket(c_.AllKey(), 0);
  const CrossProcessTicket second_ = Ticket(c_.AllKey(), 1);
  std::vector<PollHook> hooks_;
  std::vector<std::thread> threads_;
  std::vector<absl::Status> statuses_ = std::vector<absl::Status>(entering_.size());
  std::vector<absl::Time> ended_ = std::vector<absl::Time>(entering_.size());
};

TEST_P(TransportConformanceTest, LostPeerMidCallFailsTheOthersWithoutHanging) {
  const absl::Duration kTimeout = absl::Seconds(3);
  ClusterOptions options = Options(3);
  options.timeout = kTimeout;
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2, 0},
                      1000, 0, 8);
  PartialCall call(c, g, {0, 1});
  call.FirstOnAll();
  // Processes 0 and 1 start ticket 1; once both are in the call, 2 dies.
  const absl::Time start = absl::Now();
  call.Enter();
  c.Kill(2);
  const std::vector<absl::Status>& statuses = call.Join();
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

TEST_P(TransportConformanceTest, AbortFailsThePeersInsideTheCallAtOnce) {
  // A long operation timeout: only the abort can end the peers' call soon.
  const absl::Duration kTimeout = absl::Seconds(60);
  ClusterOptions options = Options(3);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Seconds(10);
  SimulatedCluster c(options);
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2}, 100, 0, 9);
  // Connected once, so the abort closes live connections. Processes 0 and
  // 1 enter ticket 1; process 2 cannot run it (its caller failed first) and
  // forfeits.
  PartialCall call(c, g, {0, 1});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  c.engine(2).Forfeit(call.second(), {0, 1, 2},
                      absl::ResourceExhaustedError("no room for the result"));
  const std::vector<absl::Status>& statuses = call.Join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kUnavailable) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("over processes 0,1,2"));
  }
  EXPECT_LT(absl::Now() - start, kTimeout / 4);
  // Every process reported the failure; the next generation works.
  EXPECT_EQ(c.failures().size(), 3u);
  const CrossProcessTicket t2 = Ticket("0,1,2", 2, /*generation=*/1);
  for (const auto& s : OnProcesses({0, 1, 2}, [&](int p) { return call.Run(p, t2, nullptr); })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ExpectResult(g);
}

TEST_P(TransportConformanceTest, AbortProcessEndsCallsWaitingOnACutOffPeer) {
  // Process 2 is alive and connected but never answers -- a partition sends
  // no FIN -- so only the abort can end the others' call before its 60 s.
  const absl::Duration kTimeout = absl::Seconds(60);
  ClusterOptions options = Options(3);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Seconds(10);
  SimulatedCluster c(options);
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2}, 100, 0, 10);
  PartialCall call(c, g, {0, 1});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  // What the cluster does when its heartbeats declare process 2 lost.
  const std::string why = "process 2 is lost (missed its heartbeats: test; epoch 2)";
  c.engine(0).AbortProcess(2, why);
  c.engine(1).AbortProcess(2, why);
  const std::vector<absl::Status>& statuses = call.Join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kUnavailable) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("over processes 0,1,2"));
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr(why));
    EXPECT_EQ(c.engine(p).cached_contexts(), 0u);
  }
  EXPECT_LT(absl::Now() - start, kTimeout / 4);
  // A group without the lost process is untouched: 0 and 1 go on.
  ExpectPairOfZeroAndOneRuns(c, /*seed=*/11);
}

// A group still in its rendezvous: processes 0 and 1 connect a group that
// holds process 2, which never arrives (cut off before it published) and
// is then declared lost. Without the abort they would wait for its entry
// until their 60 s budget; with it, their connect fails UNAVAILABLE in the
// cluster's words.
TEST_P(TransportConformanceTest, AbortProcessEndsARendezvousWaitingForALostProcess) {
  const absl::Duration kTimeout = absl::Seconds(60);
  InMemoryRendezvousStore store;
  ClusterOptions options = Options(3);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Seconds(10);
  options.store = &store;
  SimulatedCluster c(options);
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2}, 100, 0, 14);
  const CrossProcessTicket ticket = Ticket("0,1,2", 0);
  std::vector<absl::Status> statuses(2);
  std::vector<std::thread> callers;
  for (int p = 0; p < 2; ++p) {
    callers.emplace_back([&, p] {
      CollectiveItem item = ItemFor(g, p);
      CollectiveContext context;
      context.ticket = &ticket;
      statuses[p] = c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    });
  }
  // Each connecting process publishes its entry before it waits for the
  // others' (the transport contract): both are in the rendezvous then.
  const absl::Time limit = absl::Now() + absl::Seconds(20);
  while (store.size() < 2 && absl::Now() < limit) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_GE(store.size(), 2u);
  const std::string why = "process 2 (127.0.0.1:4000) is lost (epoch 4)";
  c.engine(0).AbortProcess(2, why);
  c.engine(1).AbortProcess(2, why);
  for (auto& t : callers) t.join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kUnavailable) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("processes 0,1,2"));
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr(why));
    EXPECT_EQ(c.engine(p).cached_contexts(), 0u);
  }
  EXPECT_EQ(c.failures().size(), 2u);
  // A group without the lost process is untouched: 0 and 1 go on.
  ExpectPairOfZeroAndOneRuns(c, /*seed=*/15);
}

// On a ring transport a process is connected only to its two neighbours: an
// abort must still end the call of a process that is not one of them. Process
// 0 of 8 forfeits while 1..7 are inside; process 4 is 4 hops from it. Each
// process whose call fails closes its connections (the transport's abort),
// so the failure crosses the ring one hop per process: the bound is N / 2
// hops of a connection reset each, here far below the 60 s timeout.
TEST_P(TransportConformanceTest, AbortCrossesTheRingToEveryPeer) {
  const absl::Duration kTimeout = absl::Seconds(60);
  ClusterOptions options = Options(8);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Seconds(10);
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum,
                      {0, 1, 2, 3, 4, 5, 6, 7}, 100, 0, 12);
  PartialCall call(c, g, {1, 2, 3, 4, 5, 6, 7});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  c.engine(0).Forfeit(call.second(), {0, 1, 2, 3, 4, 5, 6, 7},
                      absl::ResourceExhaustedError("no room for the result"));
  const std::vector<absl::Status>& statuses = call.Join();
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnavailable)
        << "process " << i + 1 << ": " << statuses[i];
    EXPECT_THAT(std::string(statuses[i].message()), HasSubstr("over processes 0,1,2,3,4,5,6,7"));
    EXPECT_LT(call.ended()[i] - start, kTimeout / 4) << "process " << i + 1;
  }
  std::cout << "last peer ended "
            << absl::FormatDuration(*std::max_element(call.ended().begin(), call.ended().end()) -
                                    start)
            << " after the call began\n";
  EXPECT_EQ(c.failures().size(), 8u);
  // The next generation works over the ring.
  const CrossProcessTicket t2 = Ticket(c.AllKey(), 2, /*generation=*/1);
  for (const auto& s :
       OnProcesses(AllProcesses(c), [&](int p) { return call.Run(p, t2, nullptr); })) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ExpectResult(g);
}

// Process 0 of 8 is cut off (connected, silent: no connection closes) and
// only the processes connected to it learn it (AbortProcess) -- on the Gloo
// transport 1, 2, 4 and 7, its ring neighbours and recursive-doubling
// partners: 3, 5 and 6, which are never told, must still end. A call waits
// on a connected process, which waits on another, and so on; every such
// chain here ends at a process that was told, whose abort closes its
// connections, and each process whose call fails closes its own in turn.
// (A chain that ends at a silent process ends only when the processes
// connected to it are told: the cluster tells every survivor.)
TEST_P(TransportConformanceTest, AbortProcessOnTheNeighboursEndsTheWholeRing) {
  const absl::Duration kTimeout = absl::Seconds(60);
  ClusterOptions options = Options(8);
  options.timeout = kTimeout;
  options.gap_timeout = absl::Seconds(10);
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum,
                      {0, 1, 2, 3, 4, 5, 6, 7}, 100, 0, 13);
  PartialCall call(c, g, {1, 2, 3, 4, 5, 6, 7});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  const std::string why = "process 0 is lost (missed its heartbeats: test; epoch 2)";
  for (int told : {1, 2, 4, 7}) c.engine(told).AbortProcess(0, why);
  const std::vector<absl::Status>& statuses = call.Join();
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnavailable)
        << "process " << i + 1 << ": " << statuses[i];
    EXPECT_THAT(std::string(statuses[i].message()), HasSubstr("over processes 0,1,2,3,4,5,6,7"));
    EXPECT_LT(call.ended()[i] - start, kTimeout / 4) << "process " << i + 1;
  }
  for (int told : {1, 2, 4, 7}) {
    EXPECT_THAT(std::string(statuses[told - 1].message()), HasSubstr(why)) << "process " << told;
  }
  std::cout << "last peer ended "
            << absl::FormatDuration(*std::max_element(call.ended().begin(), call.ended().end()) -
                                    start)
            << " after the call began\n";
}

TEST_P(TransportConformanceTest, RendezvousThroughAFileStore) {
  // Processes that share only a directory (one node, or a shared filesystem).
  const std::string dir =
      std::filesystem::temp_directory_path() / absl::StrCat("transport-file-store-", getpid());
  std::filesystem::create_directories(dir);
  FileRendezvousStore store(dir);
  ClusterOptions options = Options(2);
  options.store = &store;
  {
    SimulatedCluster c(options);
    Group g =
        MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 1}, 2, 0, 6);
    const CrossProcessTicket ticket = Ticket("0,1", 0);
    auto statuses = OnProcesses({0, 1}, [&](int p) {
      CollectiveItem item = ItemFor(g, p);
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    ExpectResult(g);
  }
  std::filesystem::remove_all(dir);
}

TEST_P(TransportConformanceTest, FormedGroupsLeaveNoRendezvousKeys) {
  // 200 groups (one per epoch), each formed, used once and dropped: the
  // store ends as it began, empty, and no context stays connected.
  InMemoryRendezvousStore store;
  ClusterOptions options = Options(2);
  options.store = &store;
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 4, 0, 9);
  for (uint64_t epoch = 1; epoch <= 200; ++epoch) {
    const CrossProcessTicket ticket = Ticket("0,1", 0, 0, epoch);
    auto statuses = OnProcesses({0, 1}, [&](int p) {
      CollectiveItem item = ItemFor(g, p);
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    });
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << "epoch " << epoch << ": " << s;
    for (int p : {0, 1}) c.engine(p).DropEpochsBefore(epoch + 1);
  }
  EXPECT_EQ(store.size(), 0u);
  for (int p : {0, 1}) EXPECT_EQ(c.engine(p).cached_contexts(), 0u) << "process " << p;
}

TEST_P(TransportConformanceTest, ExchangeGivesEveryProcessEveryBlockInSubsetOrder) {
  // The multi-controller agreement's words: 3 processes, a subset of 2, and
  // many rounds on one group with one tag (each round follows the last).
  SimulatedCluster c(Options(3));
  for (const std::vector<int32_t>& subset : std::vector<std::vector<int32_t>>{{0, 1, 2}, {0, 2}}) {
    const TransportGroupKey key{1, "mc/x", 0, subset};
    std::vector<int> processes(subset.begin(), subset.end());
    for (int round = 0; round < 20; ++round) {
      std::vector<std::vector<std::string>> got(3);
      auto statuses = OnProcesses(processes, [&](int p) {
        absl::StatusOr<std::vector<std::string>> blocks =
            c.transport(p).Exchange(key, absl::StrCat("p", p, "-r", round, std::string(500, '.')),
                                    0xffffffff, absl::Seconds(30), "test");
        if (!blocks.ok()) return blocks.status();
        got[p] = *std::move(blocks);
        return absl::OkStatus();
      });
      for (size_t j = 0; j < processes.size(); ++j) {
        const int p = processes[j];
        ASSERT_TRUE(statuses[j].ok()) << "process " << p << ": " << statuses[j];
        ASSERT_EQ(got[p].size(), subset.size());
        for (size_t i = 0; i < subset.size(); ++i) {
          EXPECT_EQ(got[p][i], absl::StrCat("p", subset[i], "-r", round, std::string(500, '.')));
        }
      }
    }
  }
  const TransportGroupKey one{1, "mc/y", 0, {0, 1}};
  EXPECT_EQ(c.transport(0).Exchange(one, "", 1, absl::Seconds(1), "empty").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.transport(0)
                .Exchange(one, std::string(4097, 'x'), 1, absl::Seconds(1), "big")
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_P(TransportConformanceTest, ExchangeOverFiveAndEightProcesses) {
  SimulatedCluster c(Options(8));
  for (const std::vector<int32_t>& subset : std::vector<std::vector<int32_t>>{
           {0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4}, {1, 3, 4, 6, 7}}) {
    const TransportGroupKey key{1, "mc/ring", 0, subset};
    std::vector<int> processes(subset.begin(), subset.end());
    for (int round = 0; round < 5; ++round) {
      std::vector<std::vector<std::string>> got(8);
      auto statuses = OnProcesses(processes, [&](int p) {
        absl::StatusOr<std::vector<std::string>> blocks =
            c.transport(p).Exchange(key, absl::StrCat("p", p, "-r", round, std::string(100, '.')),
                                    0xfffffffe, absl::Seconds(30), "test");
        if (!blocks.ok()) return blocks.status();
        got[p] = *std::move(blocks);
        return absl::OkStatus();
      });
      for (size_t j = 0; j < processes.size(); ++j) {
        const int p = processes[j];
        ASSERT_TRUE(statuses[j].ok()) << "process " << p << ": " << statuses[j];
        ASSERT_EQ(got[p].size(), subset.size());
        for (size_t i = 0; i < subset.size(); ++i) {
          EXPECT_EQ(got[p][i], absl::StrCat("p", subset[i], "-r", round, std::string(100, '.')));
        }
      }
    }
  }
}

TEST_P(TransportConformanceTest, CreateChecksItsOptions) {
  InMemoryRendezvousStore store;
  auto backend = *CpuBackend::Create({});
  const TransportRegistry& registry = TransportRegistry::Global();
  CrossProcessTransportOptions options;
  EXPECT_EQ(registry.Create(GetParam(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.store = &store;
  options.backend = backend.get();
  options.process_index = -1;
  EXPECT_EQ(registry.Create(GetParam(), options).status().code(),
            absl::StatusCode::kInvalidArgument);
  options.process_index = 0;
  auto made = registry.Create(GetParam(), options);
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ((*made)->Name(), GetParam());
  // A transport that listens binds the peer interface it was given, and
  // nothing it cannot name.
  const std::string address = (*made)->ListenAddress();
  EXPECT_THAT(address, AnyOf("", "127.0.0.1"));
  options.hostname = "no-such-host.invalid";
  EXPECT_EQ(registry.Create(GetParam(), options).status().code(), absl::StatusCode::kUnavailable);
  options.hostname = "0.0.0.0";
  auto wildcard = registry.Create(GetParam(), options);
  EXPECT_EQ(wildcard.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(wildcard.status().message()), HasSubstr("wildcard"));
}

TEST(TransportRegistryTest, UnknownNamesAreRefusedNamingTheRegisteredOnes) {
  auto made = TransportRegistry::Global().Create("carrier-pigeon", {});
  EXPECT_EQ(made.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("'carrier-pigeon'"));
  EXPECT_THAT(std::string(made.status().message()), HasSubstr("registered: "));
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportConformanceTest,
                         ::testing::ValuesIn(TransportRegistry::Global().Names()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportConformanceTest);

}  // namespace
}  // namespace placement::server
