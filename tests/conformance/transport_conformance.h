// The fixture the cross-process transport conformance tests share
// (transport_conformance_test.cc: results; transport_failure_conformance_test.cc:
// failures and aborts): a cluster of simulated processes on the transport
// under test (the test parameter, a TransportRegistry name) and the checks
// both files make.
#ifndef PLACEMENT_TESTS_CONFORMANCE_TRANSPORT_CONFORMANCE_H_
#define PLACEMENT_TESTS_CONFORMANCE_TRANSPORT_CONFORMANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/transport/transport_registry.h"
#include "tests/server/collective/collective_test_util.h"
#include "tests/server/collective/simulated_cluster.h"
#include "tests/server/collective/transport_test_util.h"

namespace placement::server::conformance {

using testing::AllProcesses;
using testing::ClusterOptions;
using testing::ExpectResult;
using testing::Group;
using testing::ItemFor;
using testing::ItemsFor;
using testing::MakeGroup;
using testing::OnProcesses;
using testing::SimulatedCluster;
using testing::Ticket;

class TransportConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  // The suite's processes hold CPU devices (SimulatedCluster); a transport
  // made for another platform's buffers (nccl: GPUs) refuses them, and its
  // own tests cover it (tests/gpu/nccl_transport_test.cc).
  void SetUp() override {
    const absl::Status made = testing::CreateOverCpuDevices(GetParam(), 1);
    if (absl::IsFailedPrecondition(made)) {
      GTEST_SKIP() << GetParam() << " cannot serve CPU devices: " << made;
    }
  }

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

// The transports, by name, as test names.
inline std::string TransportName(const ::testing::TestParamInfo<std::string>& info) {
  return info.param;
}

}  // namespace placement::server::conformance

#endif  // PLACEMENT_TESTS_CONFORMANCE_TRANSPORT_CONFORMANCE_H_
