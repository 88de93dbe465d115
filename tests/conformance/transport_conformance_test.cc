// Cross-process transport conformance, results: the same cluster scenarios
// on every registered CrossProcessTransport (TransportRegistry; "gloo"
// everywhere, others where the build has them), each through the
// ClusterEngine of 2-8 simulated processes (tests/server/collective/
// simulated_cluster.h: per process a CpuBackend, a LocalEngine, the
// transport and a ClusterEngine, over real TCP on loopback): every
// collective kind and the reduction numerics against float64 / exact
// integer references (also over 5 and 8 processes, where a transport may
// connect only some pairs), broadcasts from every root, device buffers
// staged through a backend that is not host-addressable, a rendezvous over
// a file store, the exchange, and the transport's own option checks.
// Failures and aborts: transport_failure_conformance_test.cc.
#include "tests/conformance/transport_conformance.h"

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/platform/cpu/cpu_backend.h"

namespace placement::server::conformance {
namespace {

using ::testing::AnyOf;
using testing::Decode;
using ::testing::HasSubstr;
using testing::Label;

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
    auto statuses = RunGroup(c, g, {0, 1}, ticket);
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
    auto statuses = RunGroup(c, g, {0, 1}, ticket);
    for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << "epoch " << epoch << ": " << s;
    for (int p : {0, 1}) c.engine(p).DropEpochsBefore(epoch + 1);
  }
  EXPECT_EQ(store.size(), 0u);
  for (int p : {0, 1}) EXPECT_EQ(c.engine(p).cached_contexts(), 0u) << "process " << p;
}

// `rounds` exchanges on each subset's group of set `set` (one tag, each
// round after the last): every process of the subset gets every block, in
// subset order.
void ExpectExchangeRounds(SimulatedCluster& c, const std::vector<std::vector<int32_t>>& subsets,
                          const std::string& set, int rounds, size_t padding, uint32_t tag) {
  for (const std::vector<int32_t>& subset : subsets) {
    const TransportGroupKey key{1, set, 0, subset};
    std::vector<int> processes(subset.begin(), subset.end());
    const auto word = [&](int p, int round) {
      return absl::StrCat("p", p, "-r", round, std::string(padding, '.'));
    };
    for (int round = 0; round < rounds; ++round) {
      std::vector<std::vector<std::string>> got(c.size());
      auto statuses = OnProcesses(processes, [&](int p) {
        absl::StatusOr<std::vector<std::string>> blocks =
            c.transport(p).Exchange(key, word(p, round), tag, absl::Seconds(30), "test");
        if (!blocks.ok()) return blocks.status();
        got[p] = *std::move(blocks);
        return absl::OkStatus();
      });
      for (size_t j = 0; j < processes.size(); ++j) {
        const int p = processes[j];
        ASSERT_TRUE(statuses[j].ok()) << "process " << p << ": " << statuses[j];
        ASSERT_EQ(got[p].size(), subset.size());
        for (size_t i = 0; i < subset.size(); ++i) EXPECT_EQ(got[p][i], word(subset[i], round));
      }
    }
  }
}

TEST_P(TransportConformanceTest, ExchangeGivesEveryProcessEveryBlockInSubsetOrder) {
  // The multi-controller agreement's words: 3 processes, a subset of 2, and
  // many rounds on one group with one tag (each round follows the last).
  SimulatedCluster c(Options(3));
  ExpectExchangeRounds(c, {{0, 1, 2}, {0, 2}}, "mc/x", /*rounds=*/20, /*padding=*/500, 0xffffffff);
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
  ExpectExchangeRounds(c, {{0, 1, 2, 3, 4, 5, 6, 7}, {0, 1, 2, 3, 4}, {1, 3, 4, 6, 7}}, "mc/ring",
                       /*rounds=*/5, /*padding=*/100, 0xfffffffe);
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
                         ::testing::ValuesIn(TransportRegistry::Global().Names()), TransportName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(TransportConformanceTest);

}  // namespace
}  // namespace placement::server::conformance
