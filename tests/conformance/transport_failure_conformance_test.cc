// Cross-process transport conformance, failures: on every registered
// transport (transport_conformance.h), a process absent from a rendezvous
// (also one declared lost meanwhile: AbortProcess ends the others'
// rendezvous), a peer lost mid-call, and an abort (Forfeit, AbortProcess)
// that fails the peers inside the call at once -- over 8 processes also
// those not connected to the aborted process. Calls that must be inside the
// engine are detected through the `cancelled` poll, never by sleeping.
#include <algorithm>
#include <atomic>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "tests/conformance/transport_conformance.h"

namespace placement::server::conformance {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using testing::PollHook;

// An all-reduce over `processes` with `ticket` runs on each of them and
// gives the computed result.
void ExpectAllReduceRuns(SimulatedCluster& c, const std::vector<int>& processes,
                         const CrossProcessTicket& ticket, uint32_t seed) {
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, processes, 100, 0,
                      seed);
  for (const auto& s : RunGroup(c, g, processes, ticket)) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(g);
}

// An all-reduce over processes 0 and 1 alone (ticket 0 of set "0,1") runs
// on both and gives the computed result.
void ExpectPairOfZeroAndOneRuns(SimulatedCluster& c, uint32_t seed) {
  ExpectAllReduceRuns(c, {0, 1}, Ticket("0,1", 0), seed);
}

// Processes 0 and 1 both ended UNAVAILABLE in the cluster's words for the
// loss of process 2 (`why`), naming the group's processes 0,1,2, and hold no
// group.
void ExpectEndedByTheLoss(SimulatedCluster& c, const std::vector<absl::Status>& statuses,
                          const std::string& why) {
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kUnavailable) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr("processes 0,1,2"));
    EXPECT_THAT(std::string(statuses[p].message()), HasSubstr(why));
    EXPECT_EQ(c.engine(p).cached_contexts(), 0u);
  }
}

// Long enough that only an abort ends a call well before it.
constexpr absl::Duration kAbortTimeout = absl::Seconds(60);

class TransportFailureTest : public TransportConformanceTest {
 protected:
  // `processes` with kAbortTimeout, and a gap timeout beyond every wait.
  ClusterOptions AbortOptions(int processes) const {
    ClusterOptions options = Options(processes);
    options.timeout = kAbortTimeout;
    options.gap_timeout = absl::Seconds(10);
    return options;
  }
};

TEST_P(TransportFailureTest, AbsentProcessTimesOutAndNextGenerationWorks) {
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
  // Ticket 2 of the set's next generation runs on every process and gives
  // the computed result.
  void ExpectNextGenerationRuns() {
    const CrossProcessTicket next = Ticket(c_.AllKey(), 2, /*generation=*/1);
    for (const auto& s :
         OnProcesses(AllProcesses(c_), [&](int p) { return Run(p, next, nullptr); })) {
      ASSERT_TRUE(s.ok()) << s;
    }
    ExpectResult(g_);
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

// Prints when the last entering process's call of `call` ended, counted
// from `start` (after Join).
void PrintLastEnded(const PartialCall& call, absl::Time start) {
  std::cout << "last peer ended "
            << absl::FormatDuration(*std::max_element(call.ended().begin(), call.ended().end()) -
                                    start)
            << " after the call began\n";
}

TEST_P(TransportFailureTest, LostPeerMidCallFailsTheOthersWithoutHanging) {
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

TEST_P(TransportFailureTest, AbortFailsThePeersInsideTheCallAtOnce) {
  // A long operation timeout: only the abort can end the peers' call soon.
  SimulatedCluster c(AbortOptions(3));
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
  EXPECT_LT(absl::Now() - start, kAbortTimeout / 4);
  // Every process reported the failure; the next generation works.
  EXPECT_EQ(c.failures().size(), 3u);
  call.ExpectNextGenerationRuns();
}

TEST_P(TransportFailureTest, AbortProcessEndsCallsWaitingOnACutOffPeer) {
  // Process 2 is alive and connected but never answers -- a partition sends
  // no FIN -- so only the abort can end the others' call before its 60 s.
  SimulatedCluster c(AbortOptions(3));
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2}, 100, 0, 10);
  PartialCall call(c, g, {0, 1});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  // What the cluster does when its heartbeats declare process 2 lost.
  const std::string why = "process 2 is lost (missed its heartbeats: test; epoch 2)";
  c.engine(0).AbortProcess(2, /*epoch=*/0, why);
  c.engine(1).AbortProcess(2, /*epoch=*/0, why);
  const std::vector<absl::Status>& statuses = call.Join();
  ExpectEndedByTheLoss(c, statuses, why);
  EXPECT_LT(absl::Now() - start, kAbortTimeout / 4);
  // A group without the lost process is untouched: 0 and 1 go on.
  ExpectPairOfZeroAndOneRuns(c, /*seed=*/11);
}

// A group still in its rendezvous: processes 0 and 1 connect a group that
// holds process 2, which never arrives (cut off before it published) and
// is then declared lost. Without the abort they would wait for its entry
// until their 60 s budget; with it, their connect fails UNAVAILABLE in the
// cluster's words.
TEST_P(TransportFailureTest, AbortProcessEndsARendezvousWaitingForALostProcess) {
  InMemoryRendezvousStore store;
  ClusterOptions options = AbortOptions(3);
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
  c.engine(0).AbortProcess(2, /*epoch=*/0, why);
  c.engine(1).AbortProcess(2, /*epoch=*/0, why);
  for (auto& t : callers) t.join();
  ExpectEndedByTheLoss(c, statuses, why);
  EXPECT_EQ(c.failures().size(), 2u);
  // The failed group's entries went with it: nobody reads them again.
  EXPECT_EQ(store.size(), 0u);
  // A group without the lost process is untouched: 0 and 1 go on.
  ExpectPairOfZeroAndOneRuns(c, /*seed=*/15);
}

// A call that reaches its group only after this daemon heard of the loss
// (it started before): no rendezvous is left to abort, and the lost process
// would never join a new one. The engine refuses a group of the loss's epoch
// or an older one that holds the process, at once and in the cluster's
// words; a group without it, and one of a later epoch, are not touched.
TEST_P(TransportFailureTest, ACallAfterTheLossIsRefusedAtOnce) {
  SimulatedCluster c(AbortOptions(3));
  const std::string why = "process 2 (127.0.0.1:4000) is lost (missed its heartbeats; epoch 4)";
  for (int p = 0; p < 2; ++p) c.engine(p).AbortProcess(2, /*epoch=*/4, why);
  Group g =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1, 2}, 100, 0, 16);
  const CrossProcessTicket ticket = Ticket("0,1,2", 0, /*generation=*/0, /*epoch=*/3);
  const absl::Time start = absl::Now();
  std::vector<absl::Status> statuses = RunGroup(c, g, {0, 1}, ticket);
  ExpectEndedByTheLoss(c, statuses, why);
  // Refused, not timed out: no rendezvous was waited for.
  EXPECT_LT(absl::Now() - start, kAbortTimeout / 4);
  ExpectPairOfZeroAndOneRuns(c, /*seed=*/17);
  // Process 2 back in a later epoch: its groups of that epoch run.
  ExpectAllReduceRuns(c, {0, 1, 2}, Ticket("0,1,2", 0, /*generation=*/0, /*epoch=*/5),
                      /*seed=*/18);
}

// A loss reported late -- process 2 of epoch 4 lost, while the others
// already run with its next incarnation at epoch 5 (it restarted and
// rejoined) -- tells the groups of epoch 4 and before only: the group of
// epoch 5, connected before the report, keeps running.
TEST_P(TransportFailureTest, ALossTellsOnlyTheGroupsOfItsEpochAndBefore) {
  SimulatedCluster c(AbortOptions(3));
  ExpectAllReduceRuns(c, {0, 1, 2}, Ticket("0,1,2", 0, /*generation=*/0, /*epoch=*/5),
                      /*seed=*/19);
  const std::string why = "process 2 (127.0.0.1:4000) is lost (epoch 4)";
  for (int p = 0; p < 2; ++p) c.engine(p).AbortProcess(2, /*epoch=*/4, why);
  ExpectAllReduceRuns(c, {0, 1, 2}, Ticket("0,1,2", 1, /*generation=*/0, /*epoch=*/5),
                      /*seed=*/20);
}

// Groups whose rendezvous failed (a process that never came) leave none of
// their entries in the store: the key is refused from then on, so nobody
// reads them again -- over many generations the store stays empty.
TEST_P(TransportFailureTest, FailedRendezvousLeaveNoKeys) {
  InMemoryRendezvousStore store;
  ClusterOptions options = Options(2);
  options.store = &store;
  options.timeout = absl::Milliseconds(100);
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 4, 0, 21);
  for (uint64_t generation = 0; generation < 3; ++generation) {
    const CrossProcessTicket ticket = Ticket("0,1", generation, generation);
    CollectiveItem item = ItemFor(g, 0);
    CollectiveContext context;
    context.ticket = &ticket;
    absl::Status alone = c.engine(0).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    EXPECT_EQ(alone.code(), absl::StatusCode::kDeadlineExceeded) << alone;
    EXPECT_EQ(store.size(), 0u) << "generation " << generation;
  }
}

// A generation given up here (the cluster engine's forfeit, or its set
// forming again) while one of its groups is still in its rendezvous: the
// rendezvous ends at once, UNAVAILABLE, rather than the abort waiting for
// the connect's budget (and the call failing only at its end).
TEST_P(TransportFailureTest, AbortGenerationEndsARendezvousInProgress) {
  ClusterOptions options = Options(2);
  options.timeout = absl::Seconds(20);
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 4, 0, 22);
  const CrossProcessTicket ticket = Ticket("0,1", 0);
  PollHook hook;
  std::atomic<bool> done{false};
  absl::Status status;
  std::thread caller([&] {
    CollectiveItem item = ItemFor(g, 0);
    CollectiveContext context;
    context.ticket = &ticket;
    context.cancelled = hook.Fn();
    status = c.engine(0).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    done = true;
  });
  ASSERT_TRUE(hook.WaitReached());
  // The call is about to connect (process 1 never comes): aborted until it
  // ends, as its group may not exist at the first abort.
  const absl::Time start = absl::Now();
  while (!done && absl::Now() - start < options.timeout) {
    c.transport(0).AbortGeneration(0, "0,1", 0);
    absl::SleepFor(absl::Milliseconds(20));
  }
  caller.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), AnyOf(HasSubstr("given up"), HasSubstr("aborted")));
  EXPECT_LT(absl::Now() - start, options.timeout / 2);
}

// On a ring transport a process is connected only to its two neighbours: an
// abort must still end the call of a process that is not one of them. Process
// 0 of 8 forfeits while 1..7 are inside; process 4 is 4 hops from it. Each
// process whose call fails closes its connections (the transport's abort),
// so the failure crosses the ring one hop per process: the bound is N / 2
// hops of a connection reset each, here far below the 60 s timeout.
TEST_P(TransportFailureTest, AbortCrossesTheRingToEveryPeer) {
  SimulatedCluster c(AbortOptions(8));
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
    EXPECT_LT(call.ended()[i] - start, kAbortTimeout / 4) << "process " << i + 1;
  }
  PrintLastEnded(call, start);
  EXPECT_EQ(c.failures().size(), 8u);
  // The next generation works over the ring.
  call.ExpectNextGenerationRuns();
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
TEST_P(TransportFailureTest, AbortProcessOnTheNeighboursEndsTheWholeRing) {
  SimulatedCluster c(AbortOptions(8));
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum,
                      {0, 1, 2, 3, 4, 5, 6, 7}, 100, 0, 13);
  PartialCall call(c, g, {1, 2, 3, 4, 5, 6, 7});
  call.FirstOnAll();
  const absl::Time start = absl::Now();
  call.Enter();
  const std::string why = "process 0 is lost (missed its heartbeats: test; epoch 2)";
  for (int told : {1, 2, 4, 7}) c.engine(told).AbortProcess(0, /*epoch=*/0, why);
  const std::vector<absl::Status>& statuses = call.Join();
  for (size_t i = 0; i < statuses.size(); ++i) {
    EXPECT_EQ(statuses[i].code(), absl::StatusCode::kUnavailable)
        << "process " << i + 1 << ": " << statuses[i];
    EXPECT_THAT(std::string(statuses[i].message()), HasSubstr("over processes 0,1,2,3,4,5,6,7"));
    EXPECT_LT(call.ended()[i] - start, kAbortTimeout / 4) << "process " << i + 1;
  }
  for (int told : {1, 2, 4, 7}) {
    EXPECT_THAT(std::string(statuses[told - 1].message()), HasSubstr(why)) << "process " << told;
  }
  PrintLastEnded(call, start);
}

INSTANTIATE_TEST_SUITE_P(Transports, TransportFailureTest,
                         ::testing::ValuesIn(TransportRegistry::Global().Names()), TransportName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportFailureTest);

}  // namespace
}  // namespace placement::server::conformance
