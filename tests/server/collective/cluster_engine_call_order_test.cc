// ClusterEngine's call-ordered sets (multi-controller: every process
// numbers the call) with P simulated processes in one test process
// (simulated_cluster.h), over the gloo transport on loopback TCP: tickets
// that run and settle without a coordinator, with and without the per-call
// check; calls that differ; a part that fails before or after its items
// and how the others learn it; a forfeited generation's notice in the store
// and how long it stays. Ticket order, gaps, parallel sets, retired epochs
// and item checks are cluster_engine_test.cc's.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/collective/collective_test_util.h"

#if PLACEMENT_WITH_GLOO
#include "tests/server/collective/simulated_cluster.h"
#endif

namespace placement::server {
namespace {

#if PLACEMENT_WITH_GLOO

using testing::ClusterOptions;
using testing::ExpectResult;
using testing::Group;
using ::testing::HasSubstr;
using testing::ItemFor;
using testing::ItemsFor;
using testing::MakeGroup;
using ::testing::Not;
using testing::OnProcesses;
using testing::SimulatedCluster;
using testing::Ticket;

// A process that gives a call up before its items (Forfeit) never joins
// the groups its peers wait in for it -- here one over a subset of the
// set. It says so in the store: their rendezvous end with its words (not
// at the 60 s timeout), and the key goes at its first call of the set's
// next generation.
TEST(ClusterEngineTest, AForfeitEndsThePeersRendezvousInGroupsItNeverJoined) {
  InMemoryRendezvousStore store;
  SimulatedCluster c({.processes = 3, .timeout = absl::Seconds(60), .store = &store});
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 16, 0, 5);
  const CrossProcessTicket ticket = Ticket(c.AllKey(), 0);
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    if (p == 1) {
      c.engine(1).Forfeit(ticket, {0, 1, 2},
                          absl::ResourceExhaustedError("device 1025: cannot allocate 64 bytes"));
      return absl::OkStatus();
    }
    CollectiveItem item = ItemFor(g, 0);
    CollectiveContext context;
    context.ticket = &ticket;
    return c.engine(0).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kUnavailable) << statuses[0];
  EXPECT_THAT(std::string(statuses[0].message()), HasSubstr("process 1 gave up"));
  EXPECT_THAT(std::string(statuses[0].message()),
              HasSubstr("device 1025: cannot allocate 64 bytes"));
  const std::string key = GenerationAbandonedKey(0, c.AllKey(), 0);
  EXPECT_TRUE(store.Get(key, absl::ZeroDuration()).ok());
  // Process 1's next call of the set, of generation 1 (none of its items
  // here): every part of the abandoned call has ended, the key goes.
  const CrossProcessTicket next = Ticket(c.AllKey(), 1, /*generation=*/1);
  CollectiveContext context;
  context.ticket = &next;
  ASSERT_TRUE(c.engine(1).Run(CollectiveKind::kAllReduce, {}, context).ok());
  EXPECT_EQ(store.Get(key, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

// A set whose forfeited generation is never called again here: its key
// goes when its epoch is retired, or at a call of any other set once
// 2 x timeout passed (every peer's wait in it has ended by then).
TEST(ClusterEngineTest, AnAbandonedKeyOfASetNeverCalledAgainGoesWithItsEpochOrItsAge) {
  InMemoryRendezvousStore store;
  const absl::Duration timeout = absl::Milliseconds(300);
  SimulatedCluster c({.processes = 2, .timeout = timeout, .store = &store});
  auto gone = [&](const std::string& key) {
    return store.Get(key, absl::ZeroDuration()).status().code() ==
           absl::StatusCode::kDeadlineExceeded;
  };
  auto call_another_set = [&](uint64_t epoch, uint64_t number) {
    const CrossProcessTicket other = Ticket("1", number, 0, epoch);
    CollectiveContext context;
    context.ticket = &other;
    return c.engine(1).Run(CollectiveKind::kAllReduce, {}, context);
  };
  c.engine(1).Forfeit(Ticket("0,1", 0, 0, /*epoch=*/0), {0, 1}, absl::InternalError("lost"));
  const std::string epoch0 = GenerationAbandonedKey(0, "0,1", 0);
  ASSERT_FALSE(gone(epoch0));
  c.engine(1).DropEpochsBefore(1);
  EXPECT_TRUE(gone(epoch0));

  const absl::Time forfeited = absl::Now();
  c.engine(1).Forfeit(Ticket("0,1", 0, 0, /*epoch=*/1), {0, 1}, absl::InternalError("lost"));
  const std::string epoch1 = GenerationAbandonedKey(1, "0,1", 0);
  ASSERT_TRUE(call_another_set(1, 0).ok());
  if (absl::Now() - forfeited < 2 * timeout) EXPECT_FALSE(gone(epoch1));
  absl::SleepFor(2 * timeout);
  ASSERT_TRUE(call_another_set(1, 1).ok());
  EXPECT_TRUE(gone(epoch1));
}

// A call-ordered ticket (multi-controller: every process numbered it):
// numbered here, `digest` standing for the request.
CrossProcessTicket Ordered(uint64_t call, std::string digest,
                           std::vector<int32_t> processes = {0, 1}) {
  CrossProcessTicket t = Ticket("mc/0,1", call);
  t.call_ordered = true;
  t.digest = std::move(digest);
  t.processes = std::move(processes);
  return t;
}

// Process p runs its item of `g` (a `kind` collective) as call-ordered
// `ticket` and settles it; its outcome.
absl::Status RunAndSettle(SimulatedCluster& c, int p, CollectiveKind kind, const Group& g,
                          const CrossProcessTicket& ticket) {
  CollectiveItem item = ItemFor(g, p);
  CollectiveContext context;
  context.ticket = &ticket;
  return c.engine(p).Settle(ticket, c.engine(p).Run(kind, {&item, 1}, context));
}

// Runs the all-reduce of `g` as call-ordered `ticket` on processes 0 and 1
// and settles it; each process's outcome.
std::vector<absl::Status> AllReduceAndSettle(SimulatedCluster& c, const Group& g,
                                             const CrossProcessTicket& ticket) {
  return OnProcesses(
      {0, 1}, [&](int p) { return RunAndSettle(c, p, CollectiveKind::kAllReduce, g, ticket); });
}

// Call-ordered tickets behave alike with and without the per-call check
// (check_calls), except for calls that differ (below).
class CallOrderedTest : public ::testing::TestWithParam<bool> {
 protected:
  ClusterOptions Options() const {
    ClusterOptions options;
    options.check_calls = GetParam();
    return options;
  }
};

INSTANTIATE_TEST_SUITE_P(Check, CallOrderedTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? std::string("Checked") : std::string("Unchecked");
                         });

TEST_P(CallOrderedTest, TicketsRunAndSettleWithoutACoordinator) {
  SimulatedCluster c(Options());
  for (uint64_t call = 0; call < 3; ++call) {
    Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0,
                        static_cast<int>(call) + 1);
    const CrossProcessTicket ticket = Ordered(call, "allreduce sum");
    auto statuses = AllReduceAndSettle(c, g, ticket);
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
    ExpectResult(g);
  }
}

TEST(ClusterEngineTest, CheckedCallOrderedMismatchFailsEverywhereWithoutRunningTheItems) {
  // With check_calls: process 0 asks for an all-reduce, process 1 for an
  // all-gather as the same call: neither runs (different Gloo operations
  // would wait for each other until the timeout); both name the other.
  ClusterOptions options;
  options.check_calls = true;
  SimulatedCluster c(options);
  Group reduce =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0, 1);
  Group gather =
      MakeGroup(c, CollectiveKind::kAllGather, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0, 2);
  const CrossProcessTicket t0 = Ordered(0, "allreduce"), t1 = Ordered(0, "allgather");
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    return p == 0 ? RunAndSettle(c, 0, CollectiveKind::kAllReduce, reduce, t0)
                  : RunAndSettle(c, 1, CollectiveKind::kAllGather, gather, t1);
  });
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].code(), absl::StatusCode::kInvalidArgument) << statuses[p];
    EXPECT_THAT(std::string(statuses[p].message()),
                HasSubstr(absl::StrCat("process ", p, " and process ", 1 - p,
                                       " asked for different collectives as call 0 of set "
                                       "mc/0,1")));
  }
  // The set goes on: the next call agrees and runs.
  Group next =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kMax, {0, 1}, 8, 0, 3);
  const CrossProcessTicket t2 = Ordered(1, "max");
  auto again = AllReduceAndSettle(c, next, t2);
  for (const auto& s : again) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(next);
}

TEST_P(CallOrderedTest, PartThatFailedBeforeRunIsNamedByTheOthers) {
  InMemoryRendezvousStore store;
  ClusterOptions options = Options();
  options.store = &store;
  SimulatedCluster c(options);
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0, 1);
  const CrossProcessTicket ticket = Ordered(0, "d");
  const absl::Status no_room = absl::ResourceExhaustedError("device 1: 128 bytes over budget");
  auto statuses = OnProcesses({0, 1}, [&](int p) {
    if (p == 1) return c.engine(p).Settle(ticket, no_room);  // never reached Run
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &ticket;
    absl::Status ran = c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    EXPECT_EQ(ran.code(), absl::StatusCode::kAborted) << ran;
    return c.engine(p).Settle(ticket, ran);
  });
  EXPECT_EQ(statuses[1], no_room);
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kAborted) << statuses[0];
  EXPECT_EQ(statuses[0].message(),
            "process 1 failed its part: RESOURCE_EXHAUSTED: device 1: 128 bytes over budget");
  // The set forms again (a new generation) and runs; the old formation's
  // forfeit notice is gone from the store.
  CrossProcessTicket again = Ordered(0, "d");
  again.generation = 1;
  auto next = AllReduceAndSettle(c, g, again);
  for (const auto& s : next) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(g);
  EXPECT_EQ(*store.DeletePrefix("forfeit/"), 0);
}

TEST(ClusterEngineTest, UncheckedCallsThatDifferNeverExchangeBytesAndFailTheNextCallEverywhere) {
  // Without check_calls, an all-reduce (SUM) on process 0 and one (MAX) on
  // process 1 as the same call: their operations carry different tags, so
  // neither reads the other's bytes; both wait out the timeout (as NCCL
  // ranks that disagree hang). The next call then fails on both, so they
  // stay at the same number, and the set forms again after it.
  ClusterOptions options;
  options.timeout = absl::Seconds(1);
  SimulatedCluster c(options);
  Group sum =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0, 1);
  Group max =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kMax, {0, 1}, 32, 0, 2);
  const CrossProcessTicket t0 = Ordered(0, "sum"), t0_max = Ordered(0, "max");
  auto first = OnProcesses({0, 1}, [&](int p) {
    return RunAndSettle(c, p, CollectiveKind::kAllReduce, p == 0 ? sum : max, p == 0 ? t0 : t0_max);
  });
  // Each fails: by its own timeout, or by the connection the other closed
  // when its timeout came first.
  int timed_out = 0;  // the first to give up times out
  for (const auto& s : first) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s)) << s;
    if (absl::IsDeadlineExceeded(s)) ++timed_out;
    // Each says what an unchecked call cannot tell apart.
    EXPECT_THAT(std::string(s.message()),
                HasSubstr("; call 0 of set mc/0,1 ran unchecked: trainers that issue a set's "
                          "collectives in different orders"));
  }
  EXPECT_GT(timed_out, 0);
  const CrossProcessTicket t1 = Ordered(1, "sum");
  auto second = AllReduceAndSettle(c, sum, t1);
  for (size_t p = 0; p < second.size(); ++p) {
    EXPECT_EQ(second[p].code(), first[p].code()) << second[p];
    EXPECT_THAT(std::string(second[p].message()), HasSubstr("failed after the collective ran"));
    // The others read the plain failure, not the caller's hint.
    EXPECT_THAT(std::string(second[p].message()), Not(HasSubstr("ran unchecked")));
  }
  CrossProcessTicket formed = Ordered(0, "sum");
  formed.generation = 1;
  auto third = AllReduceAndSettle(c, sum, formed);
  for (const auto& s : third) ASSERT_TRUE(s.ok()) << s;
  ExpectResult(sum);
}

TEST(ClusterEngineTest, UncheckedCallWhoseGroupsLeaveAProcessApartIsCheckedAllTheSame) {
  // Set 0,1,2 without check_calls. Each call has one item over processes 0
  // and 1 and one on process 2 alone: process 2 shares no group with the
  // others (partial_groups, as ClusterCollectives derives it from the
  // request). Process 0 fails call 0 before its items. Run alone, the call
  // would end on process 2 (its item never meets process 0) while 0 and 1
  // fail it, and the set would stand at different numbers; checked, every
  // process fails it naming process 0, and the next formation's calls run
  // in step.
  InMemoryRendezvousStore store;
  ClusterOptions options;
  options.processes = 3;
  options.store = &store;
  SimulatedCluster c(options);
  std::vector<Group> groups;
  groups.push_back(
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 32, 0, 1));
  groups.push_back(
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {2, 2}, 32, 0, 2));
  auto call = [](uint64_t number, uint64_t generation) {
    CrossProcessTicket t = Ordered(number, "d", {0, 1, 2});
    t.set_key = "mc/0,1,2";
    t.generation = generation;
    t.partial_groups = true;
    return t;
  };
  auto run = [&](const CrossProcessTicket& ticket, int failing, const absl::Status& why) {
    return OnProcesses({0, 1, 2}, [&](int p) {
      if (p == failing) return c.engine(p).Settle(ticket, why);  // never reached Run
      std::vector<CollectiveItem> items = ItemsFor(groups, p);
      CollectiveContext context;
      context.ticket = &ticket;
      return c.engine(p).Settle(ticket,
                                c.engine(p).Run(CollectiveKind::kAllReduce, items, context));
    });
  };
  const absl::Status no_room = absl::ResourceExhaustedError("device 0: 128 bytes over budget");
  auto first = run(call(0, 0), 0, no_room);
  EXPECT_EQ(first[0], no_room);
  for (int p : {1, 2}) {
    EXPECT_EQ(first[p].code(), absl::StatusCode::kAborted) << first[p];
    EXPECT_EQ(first[p].message(),
              "process 0 failed its part: RESOURCE_EXHAUSTED: device 0: 128 bytes over budget");
  }
  // Every process failed call 0, so every one forms the set again: the new
  // formation's calls run on all three and match the reference.
  for (uint64_t number = 0; number < 2; ++number) {
    auto next = run(call(number, 1), -1, absl::OkStatus());
    for (const auto& s : next) ASSERT_TRUE(s.ok()) << s;
    for (const Group& g : groups) ExpectResult(g);
  }
}

TEST_P(CallOrderedTest, FailureAfterTheRoundFailsTheNextCallEverywhere) {
  // Process 1's commit of call 0 fails after the collective ran: process 0's
  // call returned. Call 1 then fails on both, naming it, so both stay at the
  // same number (and the set forms again at call 2).
  SimulatedCluster c(Options());
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 16, 0, 4);
  const CrossProcessTicket t0 = Ordered(0, "d"), t1 = Ordered(1, "d");
  std::vector<bool> late(2, false);
  auto first = OnProcesses({0, 1}, [&](int p) {
    CollectiveItem item = ItemFor(g, p);
    CollectiveContext context;
    context.ticket = &t0;
    absl::Status ran = c.engine(p).Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    if (ran.ok() && p == 1) ran = absl::FailedPreconditionError("tensor 't-1' was freed");
    bool was_late = false;
    absl::Status settled = c.engine(p).Settle(t0, ran, &was_late);
    late[p] = was_late;
    return settled;
  });
  EXPECT_TRUE(first[0].ok()) << first[0];
  EXPECT_EQ(first[1].code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(late[0]);
  EXPECT_TRUE(late[1]);
  auto second = AllReduceAndSettle(c, g, t1);
  EXPECT_EQ(second[0].code(), absl::StatusCode::kAborted) << second[0];
  EXPECT_THAT(std::string(second[0].message()),
              HasSubstr("process 1 failed its part: FAILED_PRECONDITION: its part of call 0 of set "
                        "mc/0,1 failed after the collective ran"));
  EXPECT_EQ(second[1].code(), absl::StatusCode::kFailedPrecondition) << second[1];
  EXPECT_THAT(std::string(second[1].message()), HasSubstr("tensor 't-1' was freed"));
}

// A formation outlives its epoch (its calls run across unrelated
// membership changes): retiring an epoch frees every other group of it and
// older ones -- here the single-controller set's of epochs 1 and 2 -- while
// the formation's group of epoch 0 stays and keeps running.
TEST(ClusterEngineTest, RetiringEpochsKeepsOnlyTheFormationsGroups) {
  SimulatedCluster c({.processes = 2});
  Group g = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 8, 0, 31);
  for (const auto& s : AllReduceAndSettle(c, g, Ordered(0, "allreduce sum"))) {
    ASSERT_TRUE(s.ok()) << s;
  }
  for (uint64_t epoch : {1, 2}) {
    Group h = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 8, 0,
                        static_cast<uint32_t>(40 + epoch));
    for (const auto& s : RunGroup(c, h, {0, 1}, Ticket("0,1", 0, 0, epoch))) {
      ASSERT_TRUE(s.ok()) << "epoch " << epoch << ": " << s;
    }
    ExpectResult(h);
  }
  ASSERT_EQ(c.engine(0).cached_contexts(), 3u);
  for (int p : {0, 1}) c.engine(p).DropEpochsBefore(3);
  for (int p : {0, 1}) EXPECT_EQ(c.engine(p).cached_contexts(), 1u) << "process " << p;
  Group k = MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 8, 0, 32);
  for (const auto& s : AllReduceAndSettle(c, k, Ordered(1, "allreduce sum"))) {
    ASSERT_TRUE(s.ok()) << s;
  }
  ExpectResult(k);
}

// A set that forfeits again in its next generation: the first forfeit's
// key goes (every part of that generation has ended, as at the set's next
// call), the second's stays until its own turn comes.
TEST(ClusterEngineTest, ASecondForfeitOfTheSetRetiresTheFirstOnesKey) {
  InMemoryRendezvousStore store;
  SimulatedCluster c({.processes = 2, .store = &store});
  const absl::Status why = absl::ResourceExhaustedError("device 1025: cannot allocate 64 bytes");
  c.engine(1).Forfeit(Ticket("0,1", 0, /*generation=*/0), {0, 1}, why);
  const std::string first = GenerationAbandonedKey(0, "0,1", 0);
  ASSERT_TRUE(store.Get(first, absl::ZeroDuration()).ok());
  c.engine(1).Forfeit(Ticket("0,1", 1, /*generation=*/1), {0, 1}, why);
  EXPECT_EQ(store.Get(first, absl::ZeroDuration()).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(store.Get(GenerationAbandonedKey(0, "0,1", 1), absl::ZeroDuration()).ok());
}

// A formation's calls are numbered by this process itself and each one
// reaches Run or Settle: one that waits for its predecessor never skips
// it, however long past the gap timeout the predecessor comes (skipping
// would run the calls out of the other processes' order).
TEST(ClusterEngineTest, AFormationsCallWaitsForItsPredecessorPastTheGapTimeout) {
  SimulatedCluster c(
      {.processes = 2, .timeout = absl::Seconds(5), .gap_timeout = absl::Milliseconds(20)});
  Group first =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 8, 0, 51);
  Group second =
      MakeGroup(c, CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum, {0, 1}, 8, 0, 52);
  const CrossProcessTicket t0 = Ordered(0, "allreduce sum"), t1 = Ordered(1, "allreduce sum");
  auto run = [&](int p, const Group& g, const CrossProcessTicket& ticket) {
    return RunAndSettle(c, p, CollectiveKind::kAllReduce, g, ticket);
  };
  absl::Status later;
  std::thread early([&] { later = run(0, second, t1); });
  absl::SleepFor(absl::Milliseconds(200));  // ten gap timeouts
  const std::vector<absl::Status> statuses =
      OnProcesses({0, 1}, [&](int p) { return run(p, first, t0); });
  const absl::Status other = run(1, second, t1);
  early.join();
  for (const auto& s : statuses) EXPECT_TRUE(s.ok()) << s;
  EXPECT_TRUE(later.ok()) << later;
  EXPECT_TRUE(other.ok()) << other;
  ExpectResult(first);
  ExpectResult(second);
}

#else

TEST(ClusterEngineCallOrderTest, NotBuilt) {
  GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)";
}

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
