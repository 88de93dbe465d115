// GlooEngine with N ranks in one process over loopback TCP (real Gloo,
// 127.0.0.1), rendezvous through our in-memory and file stores.
#include <memory>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"
#include "tests/server/collective/collective_test_util.h"
#include "tests/testing/daemon_process.h"

#if PLACEMENT_WITH_GLOO
#include "server/collective/gloo/gloo_engine.h"
#include "server/collective/gloo/rendezvous_store.h"
#endif

namespace placement::server {
namespace {

#if PLACEMENT_WITH_GLOO

using testing::Decode;
using testing::Encode;
using ::testing::HasSubstr;
using testing::Near;
using testing::Reference;
using testing::SetProcessRanks;
using testing::TestValues;

constexpr int kRanks = 4;

class GlooEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.num_devices = kRanks;
    options.device_memory_bytes = 16 << 20;
    backend_ = *CpuBackend::Create(options);
  }

  // Connects kRanks engines (one thread per rank, as separate processes
  // would) through `store`.
  std::vector<std::unique_ptr<GlooEngine>> Connect(
      RendezvousStore* store, const std::string& prefix,
      GlooEngineOptions::Algorithm algorithm = GlooEngineOptions::Algorithm::kRing) {
    std::vector<std::unique_ptr<GlooEngine>> engines(kRanks);
    std::vector<absl::Status> statuses(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) {
      threads.emplace_back([&, r] {
        GlooEngineOptions options;
        options.rank = r;
        options.size = kRanks;
        options.store = store;
        options.prefix = prefix;
        options.timeout = absl::Seconds(20);
        options.algorithm = algorithm;
        auto engine = GlooEngine::Create(options);
        statuses[r] = engine.status();
        if (engine.ok()) engines[r] = std::move(*engine);
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < kRanks; ++r)
      EXPECT_TRUE(statuses[r].ok()) << "rank " << r << ": " << statuses[r];
    return engines;
  }

  // Runs fn(rank) on every rank at once and returns the statuses.
  static std::vector<absl::Status> OnAllRanks(const std::function<absl::Status(int)>& fn) {
    std::vector<absl::Status> statuses(kRanks);
    std::vector<std::thread> threads;
    for (int r = 0; r < kRanks; ++r) threads.emplace_back([&, r] { statuses[r] = fn(r); });
    for (auto& t : threads) t.join();
    return statuses;
  }

  std::unique_ptr<DeviceBuffer> Buffer(int64_t device, DType dtype, const std::vector<double>& v) {
    std::unique_ptr<DeviceBuffer> b = *backend_->Allocate(device, v.size() * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, v);
    EXPECT_TRUE(backend_->WriteBytes(bytes.data(), *b, 0, b->size()).ok());
    return b;
  }

  std::unique_ptr<CpuBackend> backend_;
};

TEST_F(GlooEngineTest, AllReduceMatchesReference) {
  InMemoryRendezvousStore store;
  for (auto algorithm :
       {GlooEngineOptions::Algorithm::kRing, GlooEngineOptions::Algorithm::kBcube}) {
    auto engines = Connect(
        &store, algorithm == GlooEngineOptions::Algorithm::kRing ? "ring" : "bcube", algorithm);
    ASSERT_EQ(engines.size(), static_cast<size_t>(kRanks));
    for (DType dtype : {DType::kF32, DType::kBF16, DType::kI32, DType::kF64}) {
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
        constexpr int64_t kCount = 5000;
        std::vector<std::vector<double>> values(kRanks);
        std::vector<std::unique_ptr<DeviceBuffer>> bufs;
        for (int r = 0; r < kRanks; ++r) {
          values[r] = TestValues(dtype, kCount, static_cast<uint32_t>(r + 1));
          bufs.push_back(Buffer(r, dtype, values[r]));
        }
        auto statuses = OnAllRanks([&](int r) {
          CollectiveItem item{dtype, op};
          SetProcessRanks(item, r, kRanks, {bufs[r].get()}, {bufs[r].get()});
          return engines[r]->Run(CollectiveKind::kAllReduce, {&item, 1}, {});
        });
        if (op == ReduceOp::kMean && dtype != DType::kF32 && dtype != DType::kF64) {
          // Pairwise sums in the element type would wrap: refused up front.
          for (const auto& s : statuses) {
            EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
          }
          continue;
        }
        for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
        for (int r = 0; r < kRanks; ++r) {
          std::vector<double> got = Decode(dtype, bufs[r]->data(), kCount);
          for (int64_t i = 0; i < kCount; i += 13) {
            std::vector<double> column;
            for (int q = 0; q < kRanks; ++q) column.push_back(values[q][i]);
            const double want = Reference(dtype, op, column);
            // bf16 is rounded after each pairwise step in Gloo.
            const double slack = dtype == DType::kBF16 ? 4 : 1;
            ASSERT_LE(std::fabs(got[i] - want),
                      slack * testing::Tolerance(dtype) * std::max(1.0, std::fabs(want)))
                << DTypeName(dtype) << " " << ReduceOpName(op) << " rank " << r << " i=" << i;
          }
        }
      }
    }
  }
}

TEST_F(GlooEngineTest, TwoLocalBuffersPerRankAndExplicitTags) {
  InMemoryRendezvousStore store;
  auto engines = Connect(&store, "two");
  std::vector<std::unique_ptr<DeviceBuffer>> a, b, out_a, out_b;
  for (int r = 0; r < kRanks; ++r) {
    a.push_back(Buffer(r, DType::kF32, std::vector<double>(100, r)));
    b.push_back(Buffer(r, DType::kF32, std::vector<double>(100, 10 * r)));
    out_a.push_back(*backend_->Allocate(r, 400));
    out_b.push_back(*backend_->Allocate(r, 400));
  }
  auto statuses = OnAllRanks([&](int r) {
    CollectiveItem item{DType::kF32, ReduceOp::kMean};
    SetProcessRanks(item, r, kRanks, {a[r].get(), b[r].get()}, {out_a[r].get(), out_b[r].get()});
    CollectiveContext context;
    context.tag = 77;
    return engines[r]->Run(CollectiveKind::kAllReduce, {&item, 1}, context);
  });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  // Mean of 8 contributions: (0+1+2+3) * 11 / 8.
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(Decode(DType::kF32, out_a[r]->data(), 100), std::vector<double>(100, 66.0 / 8));
    EXPECT_EQ(Decode(DType::kF32, out_b[r]->data(), 100), std::vector<double>(100, 66.0 / 8));
  }
}

TEST_F(GlooEngineTest, AllGatherReduceScatterBroadcast) {
  InMemoryRendezvousStore store;
  auto engines = Connect(&store, "agrsbc");
  constexpr int64_t kBlock = 333;
  std::vector<std::vector<double>> values(kRanks);
  std::vector<std::unique_ptr<DeviceBuffer>> send, gathered, whole, scattered;
  for (int r = 0; r < kRanks; ++r) {
    values[r] = TestValues(DType::kI64, kRanks * kBlock, static_cast<uint32_t>(r + 9));
    send.push_back(
        Buffer(r, DType::kI64, std::vector<double>(values[r].begin(), values[r].begin() + kBlock)));
    gathered.push_back(*backend_->Allocate(r, kRanks * kBlock * 8));
    whole.push_back(Buffer(r, DType::kI64, values[r]));
    scattered.push_back(*backend_->Allocate(r, kBlock * 8));
  }
  auto statuses = OnAllRanks([&](int r) -> absl::Status {
    CollectiveItem gather{DType::kI64};
    SetProcessRanks(gather, r, kRanks, {send[r].get()}, {gathered[r].get()});
    if (absl::Status s = engines[r]->Run(CollectiveKind::kAllGather, {&gather, 1}, {}); !s.ok())
      return s;
    CollectiveItem scatter{DType::kI64, ReduceOp::kSum};
    SetProcessRanks(scatter, r, kRanks, {whole[r].get()}, {scattered[r].get()});
    if (absl::Status s = engines[r]->Run(CollectiveKind::kReduceScatter, {&scatter, 1}, {});
        !s.ok())
      return s;
    CollectiveItem broadcast{DType::kI64};
    broadcast.root = 2;
    SetProcessRanks(broadcast, r, kRanks, {send[r].get()}, {send[r].get()});
    return engines[r]->Run(CollectiveKind::kBroadcast, {&broadcast, 1}, {});
  });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  std::vector<double> concat;
  for (int r = 0; r < kRanks; ++r) {
    concat.insert(concat.end(), values[r].begin(), values[r].begin() + kBlock);
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(Decode(DType::kI64, gathered[r]->data(), kRanks * kBlock), concat);
    std::vector<double> got = Decode(DType::kI64, scattered[r]->data(), kBlock);
    for (int64_t i = 0; i < kBlock; ++i) {
      double want = 0;
      for (int q = 0; q < kRanks; ++q) want += values[q][r * kBlock + i];
      ASSERT_EQ(got[i], want);
    }
    EXPECT_EQ(Decode(DType::kI64, send[r]->data(), kBlock),
              std::vector<double>(values[2].begin(), values[2].begin() + kBlock));
  }
}

TEST_F(GlooEngineTest, FileStoreRendezvous) {
  placement::testing::TempDir dir;
  FileRendezvousStore store(dir.path());
  auto engines = Connect(&store, "file");
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  for (int r = 0; r < kRanks; ++r) bufs.push_back(Buffer(r, DType::kF32, {1.0 * r, 2.0}));
  auto statuses = OnAllRanks([&](int r) {
    CollectiveItem item{DType::kF32, ReduceOp::kSum};
    SetProcessRanks(item, r, kRanks, {bufs[r].get()}, {bufs[r].get()});
    return engines[r]->Run(CollectiveKind::kAllReduce, {&item, 1}, {});
  });
  for (const auto& s : statuses) ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(Decode(DType::kF32, bufs[3]->data(), 2), (std::vector<double>{6.0, 8.0}));
}

TEST_F(GlooEngineTest, RendezvousTimesOutWhenPeersNeverJoin) {
  InMemoryRendezvousStore store;
  GlooEngineOptions options;
  options.rank = 0;
  options.size = 2;
  options.store = &store;
  options.prefix = "lonely";
  options.timeout = absl::Milliseconds(300);
  auto engine = GlooEngine::Create(options);
  EXPECT_EQ(engine.status().code(), absl::StatusCode::kDeadlineExceeded) << engine.status();
  EXPECT_THAT(std::string(engine.status().message()), HasSubstr("lonely"));
}

TEST_F(GlooEngineTest, RejectsBadOptionsAndItems) {
  InMemoryRendezvousStore store;
  GlooEngineOptions options;
  options.rank = 3;
  options.size = 2;
  options.store = &store;
  EXPECT_EQ(GlooEngine::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
  options.rank = 0;
  options.size = 1;
  auto engine = GlooEngine::Create(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  auto a = *backend_->Allocate(0, 16), b = *backend_->Allocate(0, 12);
  CollectiveItem item{DType::kF32};
  SetProcessRanks(item, /*process=*/0, /*processes=*/1, {a.get()}, {b.get()});
  absl::Status s = (*engine)->Run(CollectiveKind::kAllReduce, {&item, 1}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("recv[0] is 12 bytes, expected 16"));
}

#else

TEST(GlooEngineTest, NotBuilt) { GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)"; }

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
