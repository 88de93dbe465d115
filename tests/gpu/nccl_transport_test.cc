// The experimental "nccl" CrossProcessTransport (server/platform/cuda/
// nccl_transport.h) between simulated processes of one test process: each
// "process" is a CudaBackend over its own GPU (CudaBackendOptions::gpus)
// and an NcclTransport, all meeting through one InMemoryRendezvousStore.
// Results need two GPUs (NCCL takes one rank per GPU) and skip with fewer;
// the failure paths -- a peer that never joins times out or is lost, ranks
// that share a GPU -- need one; the refusal of a CPU backend needs none.
#include "server/platform/cuda/nccl_transport.h"

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/cluster/cluster_item.h"
#include "server/collective/transport/rendezvous_store.h"
#include "server/collective/transport/transport_registry.h"
#include "server/platform/cuda/cuda_backend.h"
#include "tests/server/collective/collective_test_util.h"
#include "tests/server/collective/transport_test_util.h"

namespace placement::server {
namespace {

using testing::Decode;
using testing::Encode;
using ::testing::HasSubstr;
using testing::Near;
using testing::Reference;
using testing::TestValues;

int32_t ProcessOf(int64_t device) { return static_cast<int32_t>(device / kMaxLocalDevices); }

// GPUs the CUDA runtime reports (0 without a driver).
int GpuCount() {
  auto backend = CudaBackend::Create({});
  return backend.ok() ? static_cast<int>((*backend)->Devices().size()) : 0;
}

TEST(NcclTransportCreateTest, RefusesDevicesThatAreNotGpus) {
  const absl::Status made = testing::CreateOverCpuDevices("nccl", 2);
  EXPECT_EQ(made.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(made.message()),
              HasSubstr("needs the cuda platform's GPUs; this daemon's devices are cpu"));
}

class NcclTransportTest : public ::testing::Test {
 protected:
  // `processes` simulated processes on GPUs 0, 1, ...; skips when the
  // machine has fewer GPUs.
  void Start(int processes, int logical_per_gpu = 1) {
    const int gpus = GpuCount();
    if (gpus < processes) {
      GTEST_SKIP() << "needs " << processes << " GPU(s), this machine has " << gpus;
    }
    for (int p = 0; p < processes; ++p) {
      CudaBackendOptions options;
      options.process_index = p;
      options.gpus = {p};
      options.logical_devices_per_gpu = logical_per_gpu;
      options.device_memory_bytes = int64_t{256} << 20;
      auto backend = CudaBackend::Create(options);
      ASSERT_TRUE(backend.ok()) << backend.status();
      backends_.push_back(std::move(*backend));
      CrossProcessTransportOptions t;
      t.store = &store_;
      t.backend = backends_.back().get();
      t.process_index = p;
      auto transport = TransportRegistry::Global().Create("nccl", t);
      ASSERT_TRUE(transport.ok()) << transport.status();
      transports_.push_back(std::move(*transport));
    }
  }

  int64_t Device(int p, int local = 0) const { return p * kMaxLocalDevices + local; }

  std::unique_ptr<DeviceBuffer> Upload(int p, int64_t device, DType dtype,
                                       const std::vector<double>& values) {
    auto b =
        *backends_[p]->Allocate(device, static_cast<int64_t>(values.size()) * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, values);
    EXPECT_TRUE(backends_[p]->WriteBytes(bytes.data(), *b, 0, b->size()).ok());
    return b;
  }
  std::vector<double> Download(int p, const DeviceBuffer& b, DType dtype) {
    std::vector<std::byte> bytes(static_cast<size_t>(b.size()));
    EXPECT_TRUE(backends_[p]->ReadBytes(b, 0, bytes.data(), b.size()).ok());
    return Decode(dtype, bytes.data(), b.size() / DTypeSize(dtype));
  }

  TransportGroupKey Key(std::vector<int32_t> processes, uint64_t generation = 0) const {
    return TransportGroupKey{1, "0,1", generation, std::move(processes)};
  }

  // Runs `item_of(p)` (planned for p) on every process at once; the
  // statuses by process.
  std::vector<absl::Status> RunEverywhere(CollectiveKind kind, const TransportGroupKey& key,
                                          const std::vector<CollectiveItem>& items) {
    const int n = static_cast<int>(transports_.size());
    std::vector<absl::Status> statuses(n);
    std::vector<std::thread> threads;
    for (int p = 0; p < n; ++p) {
      threads.emplace_back([&, p] {
        absl::StatusOr<ClusterItemPlan> plan =
            PlanClusterItem(kind, items[p], p, ProcessOf, "item 0");
        if (!plan.ok()) {
          statuses[p] = plan.status();
          return;
        }
        statuses[p] =
            transports_[p]->Run(kind, items[p], *plan, key, 0, absl::Seconds(60), "item 0, test");
      });
    }
    for (auto& t : threads) t.join();
    return statuses;
  }

  InMemoryRendezvousStore store_;
  std::vector<std::unique_ptr<CudaBackend>> backends_;
  std::vector<std::unique_ptr<CrossProcessTransport>> transports_;
};

TEST_F(NcclTransportTest, EveryKindMatchesTheReference) {
  Start(2);
  if (IsSkipped()) return;
  const int n = 2;
  const std::vector<int32_t> all = {0, 1};
  constexpr int64_t kCount = 4099;
  struct Case {
    CollectiveKind kind;
    DType dtype;
    ReduceOp op;
  };
  const std::vector<Case> cases = {
      {CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kSum},
      {CollectiveKind::kAllReduce, DType::kF32, ReduceOp::kMean},
      {CollectiveKind::kAllReduce, DType::kBF16, ReduceOp::kMax},
      {CollectiveKind::kAllReduce, DType::kI32, ReduceOp::kSum},
      {CollectiveKind::kReduceScatter, DType::kF64, ReduceOp::kSum},
      {CollectiveKind::kAllGather, DType::kI32, ReduceOp::kSum},
      {CollectiveKind::kBroadcast, DType::kF32, ReduceOp::kSum},
  };
  for (const Case& c : cases) {
    const std::string what =
        absl::StrCat(CollectiveKindName(c.kind), " ", DTypeName(c.dtype), " ", ReduceOpName(c.op));
    const int64_t send_count = c.kind == CollectiveKind::kReduceScatter ? n * kCount : kCount;
    const int64_t recv_count = c.kind == CollectiveKind::kAllGather ? n * kCount : kCount;
    std::vector<std::vector<double>> values;
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    std::vector<CollectiveItem> items;
    for (int p = 0; p < n; ++p) {
      values.push_back(TestValues(c.dtype, send_count, static_cast<uint32_t>(p + 7)));
      send.push_back(Upload(p, Device(p), c.dtype, values.back()));
      recv.push_back(*backends_[p]->Allocate(Device(p), recv_count * DTypeSize(c.dtype)));
      CollectiveItem item{c.dtype, c.op};
      item.group = {Device(0), Device(1)};
      item.root = 1;
      item.local.push_back(RankBuffers{p, send.back().get(), recv.back().get()});
      items.push_back(item);
    }
    std::vector<absl::Status> statuses = RunEverywhere(c.kind, Key(all), items);
    for (int p = 0; p < n; ++p) ASSERT_TRUE(statuses[p].ok()) << what << ": " << statuses[p];
    for (int p = 0; p < n; ++p) {
      const std::vector<double> got = Download(p, *recv[p], c.dtype);
      for (int64_t i = 0; i < recv_count; i += 7) {
        double want = 0;
        if (c.kind == CollectiveKind::kAllGather) {
          want = values[i / kCount][i % kCount];
        } else if (c.kind == CollectiveKind::kBroadcast) {
          want = values[1][i];
        } else {
          const int64_t at = c.kind == CollectiveKind::kReduceScatter ? p * kCount + i : i;
          want = Reference(c.dtype, c.op, {values[0][at], values[1][at]});
        }
        ASSERT_TRUE(Near(c.dtype, got[i], want))
            << what << " process " << p << " i=" << i << ": " << got[i] << " vs " << want;
      }
    }
  }
  // One key, one communicator set per device group; its rendezvous key is gone.
  EXPECT_EQ(transports_[0]->connected_groups(), 1u);
  EXPECT_EQ(store_.size(), 0u);
}

TEST_F(NcclTransportTest, ExchangeGivesEveryProcessEveryBlock) {
  Start(2);
  if (IsSkipped()) return;
  std::vector<absl::StatusOr<std::vector<std::string>>> got(2);
  std::vector<std::thread> threads;
  for (int p = 0; p < 2; ++p) {
    threads.emplace_back([&, p] {
      got[p] = transports_[p]->Exchange(Key({0, 1}), std::string(40, static_cast<char>('a' + p)), 0,
                                        absl::Seconds(60), "agreement");
    });
  }
  for (auto& t : threads) t.join();
  for (int p = 0; p < 2; ++p) {
    ASSERT_TRUE(got[p].ok()) << got[p].status();
    EXPECT_THAT(*got[p], ::testing::ElementsAre(std::string(40, 'a'), std::string(40, 'b')));
  }
  EXPECT_TRUE(transports_[0]->Connected(Key({0, 1})));
}

// Process 0's item over processes 0 and 1, whose process 1 never comes.
class LonePeerTest : public NcclTransportTest {
 protected:
  absl::Status RunAlone(const TransportGroupKey& key, absl::Duration budget) {
    send_ = Upload(0, Device(0), DType::kF32, std::vector<double>(1024, 1.0));
    recv_ = *backends_[0]->Allocate(Device(0), send_->size());
    CollectiveItem item{DType::kF32, ReduceOp::kSum};
    item.group = {Device(0), Device(1)};
    item.local.push_back(RankBuffers{0, send_.get(), recv_.get()});
    absl::StatusOr<ClusterItemPlan> plan =
        PlanClusterItem(CollectiveKind::kAllReduce, item, 0, ProcessOf, "item 0");
    if (!plan.ok()) return plan.status();
    return transports_[0]->Run(CollectiveKind::kAllReduce, item, *plan, key, 0, budget,
                               "item 0, test");
  }
  std::unique_ptr<DeviceBuffer> send_, recv_;
};

TEST_F(LonePeerTest, ATimeoutAbortsTheGroupAndRefusesItsKey) {
  Start(1);
  if (IsSkipped()) return;
  // Process 0 draws the id and waits in NCCL's init for rank 1.
  absl::Status first = RunAlone(Key({0, 1}), absl::Seconds(2));
  EXPECT_EQ(first.code(), absl::StatusCode::kDeadlineExceeded) << first;
  EXPECT_THAT(std::string(first.message()), HasSubstr("nccl all_reduce over processes 0,1"));
  absl::Status again = RunAlone(Key({0, 1}), absl::Seconds(2));
  EXPECT_EQ(again.code(), absl::StatusCode::kUnavailable) << again;
  EXPECT_THAT(std::string(again.message()), HasSubstr("was aborted"));
  EXPECT_FALSE(transports_[0]->Connected(Key({0, 1})));
  // The next generation is a fresh group (it times out the same way).
  EXPECT_EQ(RunAlone(Key({0, 1}, 1), absl::Milliseconds(500)).code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST_F(LonePeerTest, ALostPeerEndsTheCallWithTheClustersWords) {
  Start(1);
  if (IsSkipped()) return;
  std::thread cluster([this] {
    absl::SleepFor(absl::Milliseconds(300));
    transports_[0]->AbortProcess(1, /*through_epoch=*/1, "process 1 is lost (missed 3 heartbeats)");
  });
  const absl::Time start = absl::Now();
  absl::Status status = RunAlone(Key({0, 1}), absl::Seconds(60));
  const absl::Duration took = absl::Now() - start;
  cluster.join();
  EXPECT_EQ(status.code(), absl::StatusCode::kUnavailable) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("process 1 is lost (missed 3 heartbeats)"));
  // Well before the 60 s budget: the interrupt, not the timeout, ended it.
  EXPECT_LT(took, absl::Seconds(30));
}

TEST_F(NcclTransportTest, RanksThatShareAGpuAreRefused) {
  Start(1, /*logical_per_gpu=*/2);
  if (IsSkipped()) return;
  auto a = *backends_[0]->Allocate(Device(0, 0), 64);
  auto b = *backends_[0]->Allocate(Device(0, 1), 64);
  CollectiveItem item{DType::kF32, ReduceOp::kSum};
  item.group = {Device(0, 0), Device(0, 1), Device(1)};
  item.local = {RankBuffers{0, a.get(), a.get()}, RankBuffers{1, b.get(), b.get()}};
  absl::StatusOr<ClusterItemPlan> plan =
      PlanClusterItem(CollectiveKind::kAllReduce, item, 0, ProcessOf, "item 0");
  ASSERT_TRUE(plan.ok()) << plan.status();
  absl::Status status = transports_[0]->Run(CollectiveKind::kAllReduce, item, *plan, Key({0, 1}), 0,
                                            absl::Seconds(5), "item 0, test");
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(std::string(status.message()),
              HasSubstr("ranks 0 and 1 are both on GPU 0 (logical devices)"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("--cluster_transport=gloo"));
}

}  // namespace
}  // namespace placement::server
