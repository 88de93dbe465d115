#include "server/collective/local/local_engine.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/mesh.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/platform/platform_selection.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server {
namespace {

using testing::AddRank;
using testing::Decode;
using testing::Encode;
using ::testing::HasSubstr;
using testing::kAllOps;
using testing::kReducibleDTypes;
using testing::Near;
using testing::Reference;
using testing::SetRanks;
using testing::TestValues;

class LocalEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.num_devices = 8;
    options.device_memory_bytes = 64 << 20;
    backend_ = *CpuBackend::Create(options);
    LocalEngineOptions engine_options;
    engine_options.chunk_bytes = 4096;  // many chunks even for small buffers
    engine_options.num_threads = 3;
    engine_ = std::make_unique<LocalEngine>(engine_options);
  }

  std::unique_ptr<DeviceBuffer> Buffer(int64_t device, DType dtype, const std::vector<double>& v) {
    std::unique_ptr<DeviceBuffer> b = *backend_->Allocate(device, v.size() * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, v);
    if (!bytes.empty()) EXPECT_TRUE(backend_->WriteBytes(bytes.data(), *b, 0, b->size()).ok());
    return b;
  }
  std::unique_ptr<DeviceBuffer> Empty(int64_t device, int64_t bytes) {
    return *backend_->Allocate(device, bytes);
  }
  int64_t InUse() const {
    int64_t total = 0;
    for (const auto& d : backend_->Devices()) total += backend_->MemoryInUse(d.id);
    return total;
  }

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<LocalEngine> engine_;
};

std::vector<std::vector<int64_t>> Groups(const Mesh& mesh, const std::vector<std::string>& axes) {
  return *mesh.AxisDeviceGroups(axes);
}

// All-reduce of every op and dtype over the groups of several mesh axes,
// out of place and in place, against the float64 reference.
TEST_F(LocalEngineTest, AllReduceEveryOpAndDTypeOnMeshGroups) {
  const Mesh mesh24 = *Mesh::Create({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7});
  const Mesh mesh222 = *Mesh::Create({{"x", 2}, {"y", 2}, {"z", 2}}, {0, 1, 2, 3, 4, 5, 6, 7});
  const std::vector<std::vector<std::vector<int64_t>>> layouts = {
      Groups(mesh24, {"model"}), Groups(mesh24, {"data"}), Groups(mesh24, {}),
      Groups(mesh222, {"x", "z"}), Groups(mesh222, {"y"})};
  constexpr int64_t kCount = 3001;  // not a multiple of the chunk
  for (DType dtype : kReducibleDTypes) {
    for (ReduceOp op : kAllOps) {
      for (const auto& groups : layouts) {
        for (bool in_place : {false, true}) {
          std::vector<std::vector<double>> values(8);
          std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
          for (int64_t d = 0; d < 8; ++d) {
            values[d] = TestValues(dtype, kCount, static_cast<uint32_t>(d * 31 + 7));
            send.push_back(Buffer(d, dtype, values[d]));
            recv.push_back(in_place ? nullptr : Empty(d, send.back()->size()));
          }
          std::vector<CollectiveItem> items;
          for (const auto& group : groups) {
            CollectiveItem item{dtype, op};
            for (int64_t d : group) {
              AddRank(item, send[d].get(), in_place ? send[d].get() : recv[d].get());
            }
            items.push_back(item);
          }
          ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, items, {}).ok());
          for (const auto& group : groups) {
            for (int64_t d : group) {
              const DeviceBuffer* out = in_place ? send[d].get() : recv[d].get();
              std::vector<double> got = Decode(dtype, out->data(), kCount);
              for (int64_t i = 0; i < kCount; i += 7) {
                std::vector<double> column;
                for (int64_t g : group) column.push_back(values[g][i]);
                const double want = Reference(dtype, op, column);
                ASSERT_TRUE(Near(dtype, got[i], want))
                    << DTypeName(dtype) << " " << ReduceOpName(op) << " device " << d << " i=" << i
                    << " got " << got[i] << " want " << want;
              }
            }
          }
        }
      }
    }
  }
}

TEST_F(LocalEngineTest, AllGatherConcatenatesRanks) {
  const auto groups =
      Groups(*Mesh::Create({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7}), {"model"});
  constexpr int64_t kCount = 1500;
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
  std::vector<std::vector<double>> values(8);
  for (int64_t d = 0; d < 8; ++d) {
    values[d] = TestValues(DType::kI16, kCount, static_cast<uint32_t>(d));
    send.push_back(Buffer(d, DType::kI16, values[d]));
    recv.push_back(Empty(d, 4 * send.back()->size()));
  }
  std::vector<CollectiveItem> items;
  for (const auto& group : groups) {
    CollectiveItem item{DType::kI16};
    for (int64_t d : group) {
      AddRank(item, send[d].get(), recv[d].get());
    }
    items.push_back(item);
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllGather, items, {}).ok());
  for (const auto& group : groups) {
    std::vector<double> want;
    for (int64_t d : group) want.insert(want.end(), values[d].begin(), values[d].end());
    for (int64_t d : group) EXPECT_EQ(Decode(DType::kI16, recv[d]->data(), 4 * kCount), want);
  }
}

TEST_F(LocalEngineTest, ReduceScatterGivesEachRankItsBlock) {
  const auto groups =
      Groups(*Mesh::Create({{"x", 2}, {"y", 2}, {"z", 2}}, {0, 1, 2, 3, 4, 5, 6, 7}), {"y", "z"});
  constexpr int64_t kBlock = 1001;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI64}) {
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    std::vector<std::vector<double>> values(8);
    for (int64_t d = 0; d < 8; ++d) {
      values[d] = TestValues(dtype, 4 * kBlock, static_cast<uint32_t>(d + 100));
      send.push_back(Buffer(d, dtype, values[d]));
      recv.push_back(Empty(d, kBlock * DTypeSize(dtype)));
    }
    std::vector<CollectiveItem> items;
    for (const auto& group : groups) {
      CollectiveItem item{dtype, ReduceOp::kSum};
      for (int64_t d : group) {
        AddRank(item, send[d].get(), recv[d].get());
      }
      items.push_back(item);
    }
    ASSERT_TRUE(engine_->Run(CollectiveKind::kReduceScatter, items, {}).ok());
    for (const auto& group : groups) {
      for (size_t r = 0; r < group.size(); ++r) {
        std::vector<double> got = Decode(dtype, recv[group[r]]->data(), kBlock);
        for (int64_t i = 0; i < kBlock; ++i) {
          std::vector<double> column;
          for (int64_t g : group) column.push_back(values[g][r * kBlock + i]);
          ASSERT_TRUE(Near(dtype, got[i], Reference(dtype, ReduceOp::kSum, column)))
              << DTypeName(dtype) << " rank " << r << " i=" << i;
        }
      }
    }
  }
}

TEST_F(LocalEngineTest, BroadcastCopiesTheRootsBlock) {
  constexpr int64_t kCount = 2222;
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<std::vector<double>> values(4);
  for (int64_t d = 0; d < 4; ++d) {
    values[d] = TestValues(DType::kF64, kCount, static_cast<uint32_t>(d + 5));
    bufs.push_back(Buffer(d, DType::kF64, values[d]));
  }
  CollectiveItem item{DType::kF64};
  item.root = 2;
  for (auto& b : bufs) {
    AddRank(item, b.get(), b.get());
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kBroadcast, {&item, 1}, {}).ok());
  for (auto& b : bufs) EXPECT_EQ(Decode(DType::kF64, b->data(), kCount), values[2]);
}

// Many small items (a gradient batch) in one call, including an empty one.
TEST_F(LocalEngineTest, BatchedItemsOfDifferentSizes) {
  std::vector<std::unique_ptr<DeviceBuffer>> keep;
  std::vector<CollectiveItem> items;
  std::vector<std::vector<std::vector<double>>> values;
  for (int t = 0; t < 20; ++t) {
    const int64_t count = t * 37;
    CollectiveItem item{DType::kF32, ReduceOp::kMean};
    values.emplace_back();
    for (int64_t d = 0; d < 8; ++d) {
      values.back().push_back(TestValues(DType::kF32, count, static_cast<uint32_t>(t * 8 + d)));
      keep.push_back(Buffer(d, DType::kF32, values.back().back()));
      AddRank(item, keep.back().get(), keep.back().get());
    }
    items.push_back(item);
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, items, {}).ok());
  for (int t = 0; t < 20; ++t) {
    const int64_t count = t * 37;
    std::vector<double> got = Decode(DType::kF32, items[t].local[5].recv->data(), count);
    for (int64_t i = 0; i < count; ++i) {
      std::vector<double> column;
      for (int d = 0; d < 8; ++d) column.push_back(values[t][d][i]);
      ASSERT_TRUE(Near(DType::kF32, got[i], Reference(DType::kF32, ReduceOp::kMean, column)));
    }
  }
}

TEST_F(LocalEngineTest, CancellationStopsBetweenChunks) {
  const int64_t baseline = InUse();
  {
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    CollectiveItem item{DType::kF32};
    for (int64_t d = 0; d < 8; ++d) {
      bufs.push_back(Buffer(d, DType::kF32, std::vector<double>(1 << 16, 1.0)));
      AddRank(item, bufs.back().get(), bufs.back().get());
    }
    std::atomic<int> polls{0};
    CollectiveContext context;
    context.cancelled = [&polls] { return polls.fetch_add(1) >= 5; };
    absl::Status status = engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, context);
    EXPECT_EQ(status.code(), absl::StatusCode::kCancelled) << status;
    // 64 chunks; the call stopped long before polling all of them again.
    EXPECT_LT(polls.load(), 64 + 8);

    CollectiveContext late;
    late.deadline = absl::Now() - absl::Seconds(1);
    EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, late).code(),
              absl::StatusCode::kDeadlineExceeded);
    // The engine keeps working after a cancelled call.
    EXPECT_TRUE(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {}).ok());
  }
  EXPECT_EQ(InUse(), baseline);
}

TEST_F(LocalEngineTest, RejectsInconsistentItems) {
  auto a = Empty(0, 64), b = Empty(1, 60), c = Empty(1, 64), big = Empty(1, 128);
  CollectiveItem mismatched{DType::kF32};
  SetRanks(mismatched, {a.get(), b.get()}, {a.get(), b.get()});
  absl::Status s = engine_->Run(CollectiveKind::kAllReduce, {&mismatched, 1}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("send[1] is 60 bytes, expected 64"));

  CollectiveItem in_place_gather{DType::kF32};
  SetRanks(in_place_gather, {a.get(), c.get()}, {big.get(), c.get()});
  s = engine_->Run(CollectiveKind::kAllGather, {&in_place_gather, 1}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);

  CollectiveItem boolean{DType::kBool};
  SetRanks(boolean, {a.get(), c.get()}, {a.get(), c.get()});
  EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&boolean, 1}, {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(engine_->Run(CollectiveKind::kBroadcast, {&boolean, 1}, {})
                  .ok());  // data movement: any dtype

  CollectiveItem bad_root{DType::kF32};
  bad_root.root = 2;
  SetRanks(bad_root, {a.get(), c.get()}, {a.get(), c.get()});
  s = engine_->Run(CollectiveKind::kBroadcast, {&bad_root, 1}, {});
  EXPECT_THAT(std::string(s.message()), HasSubstr("root rank 2 outside [0, 2)"));
}

// Eight threads issue collectives at once: each finishes with the right
// values (the pool is shared, callers always make progress).
TEST_F(LocalEngineTest, ConcurrentCallersShareThePool) {
  constexpr int kThreads = 8;
  constexpr int64_t kCount = 20000;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<std::unique_ptr<DeviceBuffer>> bufs;
      CollectiveItem item{DType::kF32, ReduceOp::kSum};
      for (int64_t d = 0; d < 4; ++d) {
        bufs.push_back(Buffer((t + d) % 8, DType::kF32, std::vector<double>(kCount, d + t)));
        AddRank(item, bufs.back().get(), bufs.back().get());
      }
      for (int round = 0; round < 5; ++round) {
        if (!engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {}).ok()) failures.fetch_add(1);
      }
      // After 5 in-place sums of 4 ranks: (0+1+2+3 + 4t) * 4^4.
      const double want = (6.0 + 4.0 * t) * 256.0;
      std::vector<double> got = Decode(DType::kF32, bufs[0]->data(), kCount);
      for (double v : got) {
        if (v != want) {
          failures.fetch_add(1);
          break;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(EngineFactoryTest, CpuBackendGetsTheLocalEngine) {
  CpuBackendOptions options;
  options.num_devices = 2;
  options.device_memory_bytes = 1 << 20;
  auto backend = *CpuBackend::Create(options);
  auto engine = CreateCollectiveEngine(backend.get());
  ASSERT_TRUE(engine.ok()) << engine.status();
  EXPECT_EQ((*engine)->Name(), "local");
}

}  // namespace
}  // namespace placement::server
