// NcclEngine on the GPUs of this machine (skipped without one). With one GPU
// the group of size 1, batching, caching, abort/rebuild and cancellation
// paths still run; with more, the groups span them.
#include "server/platform/cuda/nccl_engine.h"

#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cuda/cuda_backend.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server {
namespace {

using testing::AddRank;
using testing::Decode;
using testing::Encode;
using testing::Near;
using testing::Reference;
using testing::SetRanks;
using testing::TestValues;

class NcclEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = CudaBackend::Create({});
    if (!backend.ok()) GTEST_SKIP() << "no GPU: " << backend.status();
    backend_ = std::move(*backend);
    auto engine = NcclEngine::Create(backend_.get());
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    for (const auto& d : backend_->Devices()) ids_.push_back(d.id);
  }

  std::unique_ptr<DeviceBuffer> Upload(int64_t device, DType dtype, const std::vector<double>& v) {
    std::unique_ptr<DeviceBuffer> b = *backend_->Allocate(device, v.size() * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, v);
    EXPECT_TRUE(backend_->WriteBytes(bytes.data(), *b, 0, b->size()).ok());
    return b;
  }
  std::vector<double> Download(const DeviceBuffer& b, DType dtype) {
    std::vector<std::byte> bytes(b.size());
    EXPECT_TRUE(backend_->ReadBytes(b, 0, bytes.data(), b.size()).ok());
    return Decode(dtype, bytes.data(), b.size() / DTypeSize(dtype));
  }

  std::unique_ptr<CudaBackend> backend_;
  std::unique_ptr<NcclEngine> engine_;
  std::vector<int64_t> ids_;
};

TEST_F(NcclEngineTest, AllReduceEveryGpuMatchesReference) {
  const int n = static_cast<int>(ids_.size());
  constexpr int64_t kCount = 100003;
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16, DType::kF64, DType::kI32}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kProd}) {
      std::vector<std::vector<double>> values;
      std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
      CollectiveItem item{dtype, op};
      for (int r = 0; r < n; ++r) {
        values.push_back(TestValues(dtype, kCount, static_cast<uint32_t>(r + 1)));
        send.push_back(Upload(ids_[r], dtype, values.back()));
        recv.push_back(*backend_->Allocate(ids_[r], send.back()->size()));
        AddRank(item, send.back().get(), recv.back().get());
      }
      absl::Status status = engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {});
      ASSERT_TRUE(status.ok()) << status;
      for (int r = 0; r < n; ++r) {
        std::vector<double> got = Download(*recv[r], dtype);
        for (int64_t i = 0; i < kCount; i += 101) {
          std::vector<double> column;
          for (int q = 0; q < n; ++q) column.push_back(values[q][i]);
          ASSERT_TRUE(Near(dtype, got[i], Reference(dtype, op, column)))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " rank " << r << " i=" << i;
        }
      }
    }
  }
  EXPECT_EQ(engine_->cached_groups(), 1);  // created once, reused
}

TEST_F(NcclEngineTest, BatchedItemsAndSingleGpuGroups) {
  // One item per GPU (groups of size 1) plus a batch on the first GPU.
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<CollectiveItem> items;
  for (int64_t id : ids_) {
    for (int t = 0; t < 3; ++t) {
      bufs.push_back(Upload(id, DType::kF32, std::vector<double>(1000 + t, 2.5)));
      CollectiveItem item{DType::kF32, ReduceOp::kSum};
      SetRanks(item, {bufs.back().get()}, {bufs.back().get()});
      items.push_back(item);
    }
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, items, {}).ok());
  for (const auto& b : bufs) {
    for (double v : Download(*b, DType::kF32)) ASSERT_EQ(v, 2.5);
  }
  EXPECT_EQ(engine_->cached_groups(), static_cast<int64_t>(ids_.size()));
}

TEST_F(NcclEngineTest, GatherScatterBroadcast) {
  const int n = static_cast<int>(ids_.size());
  constexpr int64_t kBlock = 4096;
  std::vector<std::unique_ptr<DeviceBuffer>> send, gathered, whole, scattered;
  CollectiveItem gather{DType::kF32}, scatter{DType::kF32, ReduceOp::kSum}, bcast{DType::kF32};
  bcast.root = n - 1;
  for (int r = 0; r < n; ++r) {
    send.push_back(Upload(ids_[r], DType::kF32, std::vector<double>(kBlock, r + 1)));
    gathered.push_back(*backend_->Allocate(ids_[r], n * kBlock * 4));
    whole.push_back(Upload(ids_[r], DType::kF32, std::vector<double>(n * kBlock, 1.0)));
    scattered.push_back(*backend_->Allocate(ids_[r], kBlock * 4));
    AddRank(gather, send[r].get(), gathered[r].get());
    AddRank(scatter, whole[r].get(), scattered[r].get());
    AddRank(bcast, send[r].get(), send[r].get());
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllGather, {&gather, 1}, {}).ok());
  ASSERT_TRUE(engine_->Run(CollectiveKind::kReduceScatter, {&scatter, 1}, {}).ok());
  ASSERT_TRUE(engine_->Run(CollectiveKind::kBroadcast, {&bcast, 1}, {}).ok());
  for (int r = 0; r < n; ++r) {
    std::vector<double> g = Download(*gathered[r], DType::kF32);
    for (int q = 0; q < n; ++q) ASSERT_EQ(g[q * kBlock], q + 1);
    for (double v : Download(*scattered[r], DType::kF32)) ASSERT_EQ(v, n);
    for (double v : Download(*send[r], DType::kF32)) ASSERT_EQ(v, n);
  }
}

TEST_F(NcclEngineTest, AbortedCommunicatorsAreRebuilt) {
  auto buf = Upload(ids_[0], DType::kF32, std::vector<double>(64, 1.0));
  CollectiveItem item{DType::kF32, ReduceOp::kSum};
  SetRanks(item, {buf.get()}, {buf.get()});
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {}).ok());
  ASSERT_EQ(engine_->cached_groups(), 1);
  ASSERT_TRUE(engine_->AbortGroup({ids_[0]}).ok());
  EXPECT_EQ(engine_->cached_groups(), 0);
  EXPECT_EQ(engine_->AbortGroup({ids_[0]}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {}).ok());
  EXPECT_EQ(engine_->cached_groups(), 1);
}

TEST_F(NcclEngineTest, CancellationAndUnsupportedTypes) {
  auto buf = Upload(ids_[0], DType::kF32, std::vector<double>(1 << 24, 1.0));
  CollectiveItem item{DType::kF32, ReduceOp::kSum};
  SetRanks(item, {buf.get()}, {buf.get()});
  CollectiveContext cancelled;
  cancelled.cancelled = [] { return true; };
  EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, cancelled).code(),
            absl::StatusCode::kCancelled);
  // Cancelled while waiting: either the GPU finished first, or the group was
  // aborted and the next call rebuilds it. Both leave the engine usable.
  int polls = 0;
  CollectiveContext late;
  late.cancelled = [&polls] { return ++polls > 1; };
  absl::Status status = engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, late);
  EXPECT_TRUE(status.ok() || status.code() == absl::StatusCode::kCancelled) << status;
  EXPECT_TRUE(engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {}).ok());

  auto small = *backend_->Allocate(ids_[0], 64);
  CollectiveItem i16{DType::kI16, ReduceOp::kSum};
  SetRanks(i16, {small.get()}, {small.get()});
  EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&i16, 1}, {}).code(),
            absl::StatusCode::kInvalidArgument);
}

// Logical devices: 4 per GPU. A group of the 4 devices of GPU 0 cannot be an
// NCCL communicator (one rank per GPU), so it runs host-staged; a group of one
// device per GPU in the same call still runs on NCCL.
TEST(NcclLogicalDevicesTest, GroupsSharingAGpuRunHostStaged) {
  CudaBackendOptions options;
  options.logical_devices_per_gpu = 4;
  options.device_memory_bytes = int64_t{256} << 20;
  auto backend = CudaBackend::Create(options);
  if (!backend.ok()) GTEST_SKIP() << "no GPU: " << backend.status();
  auto engine = NcclEngine::Create(backend->get());
  ASSERT_TRUE(engine.ok()) << engine.status();
  CudaBackend& b = **backend;
  auto upload = [&](int64_t device, DType dtype, const std::vector<double>& v) {
    std::unique_ptr<DeviceBuffer> buf = *b.Allocate(device, v.size() * DTypeSize(dtype));
    std::vector<std::byte> bytes = Encode(dtype, v);
    EXPECT_TRUE(b.WriteBytes(bytes.data(), *buf, 0, buf->size()).ok());
    return buf;
  };
  auto download = [&](const DeviceBuffer& buf, DType dtype) {
    std::vector<std::byte> bytes(buf.size());
    EXPECT_TRUE(b.ReadBytes(buf, 0, bytes.data(), buf.size()).ok());
    return Decode(dtype, bytes.data(), buf.size() / DTypeSize(dtype));
  };
  constexpr int64_t kCount = 30011;
  // i16 too: NCCL cannot reduce it, the host-staged path can.
  for (DType dtype : {DType::kF32, DType::kBF16, DType::kI16}) {
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
      std::vector<std::vector<double>> values;
      std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
      CollectiveItem shared{dtype, op};
      for (int r = 0; r < 4; ++r) {
        values.push_back(TestValues(dtype, kCount, static_cast<uint32_t>(r + 11)));
        send.push_back(upload(r, dtype, values.back()));
        recv.push_back(*b.Allocate(r, send.back()->size()));
        AddRank(shared, send.back().get(), recv.back().get());
      }
      std::vector<CollectiveItem> items = {shared};
      std::unique_ptr<DeviceBuffer> single;
      if (dtype != DType::kI16) {  // one rank on GPU 0: NCCL
        single = upload(0, dtype, std::vector<double>(1000, 3.0));
        CollectiveItem alone{dtype, op};
        SetRanks(alone, {single.get()}, {single.get()});
        items.push_back(alone);
      }
      absl::Status status = (*engine)->Run(CollectiveKind::kAllReduce, items, {});
      ASSERT_TRUE(status.ok()) << status;
      for (int r = 0; r < 4; ++r) {
        std::vector<double> got = download(*recv[r], dtype);
        for (int64_t i = 0; i < kCount; i += 97) {
          std::vector<double> column;
          for (int q = 0; q < 4; ++q) column.push_back(values[q][i]);
          ASSERT_TRUE(Near(dtype, got[i], Reference(dtype, op, column)))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " rank " << r << " i=" << i;
        }
      }
      if (single) {
        for (double v : download(*single, dtype)) ASSERT_EQ(v, 3.0);
      }
    }
  }
  // Only the single-rank group made NCCL communicators.
  EXPECT_EQ((*engine)->cached_groups(), 1);
  // Gather and broadcast host-staged too.
  constexpr int64_t kBlock = 1000;
  std::vector<std::unique_ptr<DeviceBuffer>> parts, gathered;
  CollectiveItem gather{DType::kF32}, bcast{DType::kF32};
  bcast.root = 2;
  for (int r = 0; r < 4; ++r) {
    parts.push_back(upload(r, DType::kF32, std::vector<double>(kBlock, r + 1)));
    gathered.push_back(*b.Allocate(r, 4 * kBlock * 4));
    AddRank(gather, parts[r].get(), gathered[r].get());
    AddRank(bcast, r == 2 ? parts[r].get() : nullptr, parts[r].get());
  }
  ASSERT_TRUE((*engine)->Run(CollectiveKind::kAllGather, {&gather, 1}, {}).ok());
  ASSERT_TRUE((*engine)->Run(CollectiveKind::kBroadcast, {&bcast, 1}, {}).ok());
  for (int r = 0; r < 4; ++r) {
    std::vector<double> g = download(*gathered[r], DType::kF32);
    for (int q = 0; q < 4; ++q) ASSERT_EQ(g[q * kBlock], q + 1);
    for (double v : download(*parts[r], DType::kF32)) ASSERT_EQ(v, 3);
  }
  CollectiveContext cancelled;
  cancelled.cancelled = [] { return true; };
  EXPECT_EQ((*engine)->Run(CollectiveKind::kAllGather, {&gather, 1}, cancelled).code(),
            absl::StatusCode::kCancelled);
}

}  // namespace
}  // namespace placement::server
