// Backend conformance: every registered platform's DeviceBackend and
// intra-node CollectiveEngine, made through the platform from one
// PlatformConfig, against the same expectations -- allocation and exact
// accounting, budget exhaustion, byte round trips and ranges, the block
// cache counted against the budget, and every collective kind against a
// float64 reference. Platforms not usable here (cuda without a GPU) skip.
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/collective_engine.h"
#include "tests/conformance/conformance_util.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server::conformance {
namespace {

using ::testing::HasSubstr;
using testing::Near;
using testing::Reference;
using testing::TestValues;

class BackendConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    platform_ = PlatformRegistry::Global().Find(GetParam());
    ASSERT_NE(platform_, nullptr);
    config_ = ConformanceConfig();
    absl::StatusOr<std::unique_ptr<DeviceBackend>> backend = platform_->CreateBackend(config_);
    if (absl::IsFailedPrecondition(backend.status())) {
      GTEST_SKIP() << GetParam() << " is not usable here: " << backend.status();
    }
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
    ASSERT_GE(backend_->Devices().size(), 2u);
    EXPECT_EQ(backend_->Name(), GetParam());
    for (const DeviceDescription& d : backend_->Devices()) ids_.push_back(d.id);
  }

  int64_t Limit(int64_t id) const {
    for (const DeviceDescription& d : backend_->Devices()) {
      if (d.id == id) return d.memory_limit_bytes;
    }
    return 0;
  }

  std::unique_ptr<DeviceBuffer> Upload(int64_t device, const std::vector<std::byte>& bytes) {
    auto buffer = backend_->Allocate(device, static_cast<int64_t>(bytes.size()));
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    if (!buffer.ok()) return nullptr;
    if (!bytes.empty()) {
      EXPECT_TRUE(backend_->WriteBytes(bytes.data(), **buffer, 0, (*buffer)->size()).ok());
    }
    return std::move(*buffer);
  }

  std::vector<std::byte> Bytes(const DeviceBuffer& buffer) {
    std::vector<std::byte> out(static_cast<size_t>(buffer.size()));
    if (!out.empty()) EXPECT_TRUE(backend_->ReadBytes(buffer, 0, out.data(), buffer.size()).ok());
    return out;
  }

  static std::vector<std::byte> RandomBytes(size_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<std::byte> out(n);
    for (auto& b : out) b = static_cast<std::byte>(rng() & 0xff);
    return out;
  }

  const Platform* platform_ = nullptr;
  PlatformConfig config_;
  std::unique_ptr<DeviceBackend> backend_;
  std::vector<int64_t> ids_;
};

TEST_P(BackendConformanceTest, DescribesDevicesWithConsecutiveGlobalIds) {
  const auto& devices = backend_->Devices();
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].local_index, static_cast<int32_t>(i));
    EXPECT_EQ(devices[i].id, devices[0].id + static_cast<int64_t>(i));
    EXPECT_EQ(devices[i].process_index, config_.process_index);
    EXPECT_GT(devices[i].memory_limit_bytes, 0);
    EXPECT_LE(devices[i].memory_limit_bytes, kDeviceBudget);
  }
  PlatformConfig other = config_;
  other.process_index = 2;
  auto shifted = platform_->CreateBackend(other);
  ASSERT_TRUE(shifted.ok()) << shifted.status();
  EXPECT_EQ((*shifted)->Devices()[0].id, 2 * kMaxLocalDevices);
  EXPECT_EQ((*shifted)->Devices()[0].process_index, 2);
}

TEST_P(BackendConformanceTest, ExactAccountingPerDevice) {
  {
    auto a = backend_->Allocate(ids_[0], 1000);
    auto b = backend_->Allocate(ids_[0], 3);
    auto c = backend_->Allocate(ids_[1], 4096);
    ASSERT_TRUE(a.ok() && b.ok() && c.ok());
    EXPECT_EQ(backend_->MemoryInUse(ids_[0]), 1003);
    EXPECT_EQ(backend_->MemoryInUse(ids_[1]), 4096);
    EXPECT_EQ((*a)->size(), 1000);
    EXPECT_EQ((*a)->device_id(), ids_[0]);
  }
  EXPECT_EQ(backend_->MemoryInUse(ids_[0]), 0);
  EXPECT_EQ(backend_->MemoryInUse(ids_[1]), 0);
  auto zero = backend_->Allocate(ids_[0], 0);
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ((*zero)->size(), 0);
  EXPECT_EQ(backend_->MemoryInUse(ids_[0]), 0);
  const int64_t unknown = ids_.back() + 1;
  EXPECT_EQ(backend_->Allocate(unknown, 8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend_->MemoryInUse(unknown), 0);
  EXPECT_EQ(backend_->Allocate(ids_[0], -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(BackendConformanceTest, BudgetExhaustionNamesTheNumbersAndKeepsTheAccounting) {
  const int64_t limit = Limit(ids_[0]);
  // The budget bounds what buffers are charged (their blocks and, where
  // device memory is host memory, their host overhead), never less than the
  // bytes asked for.
  const int64_t small = 100;
  EXPECT_GE(backend_->ChargeFor(small), small);
  const int64_t room = limit - backend_->ChargeFor(small);
  int64_t most = 0;  // the largest size whose charge fits `room`
  for (int64_t step = int64_t{1} << 40; step > 0; step /= 2) {
    if (backend_->ChargeFor(most + step) <= room) most += step;
  }
  auto first = backend_->Allocate(ids_[0], most);
  ASSERT_TRUE(first.ok()) << first.status();
  const int64_t charged = backend_->ChargeFor(most);
  EXPECT_EQ(backend_->MemoryCharged(ids_[0]), charged);
  auto over = backend_->Allocate(ids_[0], most);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr(absl::StrCat("cannot allocate ", most, " bytes")));
  EXPECT_THAT(
      std::string(over.status().message()),
      HasSubstr(absl::StrCat(charged, " of ", limit, " bytes charged (", most, " in use)")));
  EXPECT_EQ(backend_->MemoryInUse(ids_[0]), most);
  auto exact = backend_->Allocate(ids_[0], small);
  ASSERT_TRUE(exact.ok()) << exact.status();
  EXPECT_EQ(backend_->MemoryInUse(ids_[0]), most + small);
  EXPECT_LE(backend_->MemoryCharged(ids_[0]), limit);
  // Other devices have their own budgets.
  EXPECT_TRUE(backend_->Allocate(ids_[1], small).ok());
}

TEST_P(BackendConformanceTest, ByteRoundTripsAndCopiesBetweenDevices) {
  for (int64_t size : {int64_t{1}, int64_t{4095}, int64_t{1} << 20, (int64_t{3} << 20) + 7}) {
    const std::vector<std::byte> bytes = RandomBytes(static_cast<size_t>(size), 7);
    auto a = Upload(ids_[0], bytes);
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(Bytes(*a), bytes) << size;
    auto b = backend_->Allocate(ids_[1], size);
    ASSERT_TRUE(b.ok());
    ByteRun whole{0, 0, size};
    ASSERT_TRUE(backend_->Copy(*a, **b, {&whole, 1}).ok());
    EXPECT_EQ(Bytes(**b), bytes) << size;
  }
}

TEST_P(BackendConformanceTest, ByteRangesScatterAndGather) {
  constexpr int64_t kBlock = 1000;
  constexpr int kBlocks = 8;
  const std::vector<std::byte> host = RandomBytes(kBlock * kBlocks, 11);
  auto buffer = backend_->Allocate(ids_[0], kBlock * kBlocks);
  ASSERT_TRUE(buffer.ok());
  // Write block i of the host to block (7 - i) of the device.
  std::vector<ByteRun> reverse;
  for (int i = 0; i < kBlocks; ++i)
    reverse.push_back({i * kBlock, (kBlocks - 1 - i) * kBlock, kBlock});
  ASSERT_TRUE(backend_->Write(host.data(), **buffer, reverse).ok());
  // Read the odd device blocks, packed.
  std::vector<ByteRun> odd;
  for (int i = 1; i < kBlocks; i += 2) odd.push_back({i * kBlock, (i / 2) * kBlock, kBlock});
  std::vector<std::byte> packed(kBlock * kBlocks / 2);
  ASSERT_TRUE(backend_->Read(**buffer, packed.data(), odd).ok());
  for (int j = 0; j < kBlocks / 2; ++j) {
    const int device_block = 2 * j + 1;
    const int host_block = kBlocks - 1 - device_block;
    EXPECT_EQ(std::memcmp(packed.data() + j * kBlock, host.data() + host_block * kBlock, kBlock), 0)
        << "block " << j;
  }
  // Device -> device, sub-ranges at odd offsets.
  auto other = backend_->Allocate(ids_[1], 3 * kBlock);
  ASSERT_TRUE(other.ok());
  std::vector<ByteRun> runs = {{17, 0, 100}, {kBlock + 3, 100, 2 * kBlock - 100}};
  ASSERT_TRUE(backend_->Copy(**buffer, **other, runs).ok());
  const std::vector<std::byte> device = Bytes(**buffer);
  const std::vector<std::byte> copied = Bytes(**other);
  EXPECT_EQ(std::memcmp(copied.data(), device.data() + 17, 100), 0);
  EXPECT_EQ(std::memcmp(copied.data() + 100, device.data() + kBlock + 3, 2 * kBlock - 100), 0);
}

TEST_P(BackendConformanceTest, CacheCountsAgainstTheBudgetAndNeverBlocksAnAllocation) {
  const int64_t id = ids_[0];
  const int64_t limit = Limit(id);
  const int64_t quarter = limit / 4;
  {
    auto a = backend_->Allocate(id, quarter);
    ASSERT_TRUE(a.ok()) << a.status();
  }
  EXPECT_EQ(backend_->MemoryInUse(id), 0);
  const int64_t cached = backend_->MemoryCached(id);
  EXPECT_LE(cached, limit);  // a platform may keep it or not, never beyond the budget
  if (cached > 0) {
    // The same size comes back from the cache.
    auto again = backend_->Allocate(id, quarter);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(backend_->MemoryCached(id), 0);
  }
  {
    auto a = backend_->Allocate(id, quarter);
    ASSERT_TRUE(a.ok());
  }
  // The whole budget in one allocation of another size: the cache gives way.
  int64_t whole = 0;  // the largest size whose charge fits the budget
  for (int64_t step = int64_t{1} << 40; step > 0; step /= 2) {
    if (backend_->ChargeFor(whole + step) <= limit) whole += step;
  }
  auto all = backend_->Allocate(id, whole);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(backend_->MemoryInUse(id), whole);
  EXPECT_EQ(backend_->MemoryCached(id), 0);
  all->reset();
  EXPECT_EQ(backend_->MemoryInUse(id), 0);
  EXPECT_EQ(backend_->MemoryCharged(id), 0);
  EXPECT_LE(backend_->MemoryCharged(id) + backend_->MemoryCached(id), limit);
}

TEST_P(BackendConformanceTest, InUsePlusCachedStaysWithinTheBudget) {
  const int64_t id = ids_[1];
  const int64_t limit = Limit(id);
  std::mt19937 rng(5);
  std::vector<std::unique_ptr<DeviceBuffer>> live;
  for (int step = 0; step < 200; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      live.erase(live.begin() + static_cast<int64_t>(rng() % live.size()));
    } else {
      const int64_t size = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(limit / 6));
      auto b = backend_->Allocate(id, size);
      if (b.ok()) {
        live.push_back(std::move(*b));
      } else {
        ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted) << b.status();
        // Refused only when what it would cost (its block and overhead)
        // does not fit beside what is charged; cached blocks never block.
        ASSERT_GT(backend_->MemoryCharged(id) + backend_->ChargeFor(size), limit)
            << "refused while the budget had room";
      }
    }
    ASSERT_LE(backend_->MemoryCharged(id) + backend_->MemoryCached(id), limit) << "step " << step;
  }
}

// --- Collectives through the platform's engine ------------------------------

class EngineConformanceTest : public BackendConformanceTest {
 protected:
  void SetUp() override {
    BackendConformanceTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    auto engine = platform_->CreateEngine(backend_.get(), config_);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
    n_ = static_cast<int>(ids_.size());
  }

  std::unique_ptr<DeviceBuffer> UploadValues(int64_t device, DType dtype,
                                             const std::vector<double>& values) {
    return Upload(device, testing::Encode(dtype, values));
  }
  std::vector<double> Values(const DeviceBuffer& b, DType dtype) {
    std::vector<std::byte> bytes = Bytes(b);
    return testing::Decode(dtype, bytes.data(), b.size() / DTypeSize(dtype));
  }

  std::unique_ptr<CollectiveEngine> engine_;
  int n_ = 0;
};

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kI32};

TEST_P(EngineConformanceTest, AllReduceEveryOpMatchesTheReference) {
  constexpr int64_t kCount = 3001;
  for (DType dtype : kDTypes) {
    for (ReduceOp op : testing::kAllOps) {
      // Integer MEAN rounding is engine-specific (documented per engine).
      if (op == ReduceOp::kMean && !IsFloatingPoint(dtype)) continue;
      std::vector<std::vector<double>> values;
      std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
      CollectiveItem item{dtype, op};
      for (int r = 0; r < n_; ++r) {
        values.push_back(TestValues(dtype, kCount, static_cast<uint32_t>(r * 13 + 1)));
        send.push_back(UploadValues(ids_[r], dtype, values.back()));
        recv.push_back(std::move(*backend_->Allocate(ids_[r], send.back()->size())));
        testing::AddRank(item, send.back().get(), recv.back().get());
      }
      absl::Status status = engine_->Run(CollectiveKind::kAllReduce, {&item, 1}, {});
      ASSERT_TRUE(status.ok()) << status;
      for (int r = 0; r < n_; ++r) {
        std::vector<double> got = Values(*recv[r], dtype);
        for (int64_t i = 0; i < kCount; i += 17) {
          std::vector<double> column;
          for (int q = 0; q < n_; ++q) column.push_back(values[q][i]);
          const double want = Reference(dtype, op, column);
          ASSERT_TRUE(Near(dtype, got[i], want))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " rank " << r << " i=" << i
              << ": got " << got[i] << " want " << want;
        }
      }
    }
  }
}

TEST_P(EngineConformanceTest, AllReduceInPlaceOverTwoGroupsInOneCall) {
  constexpr int64_t kCount = 1000;
  // Ranks split into two groups (even and odd devices), fused in one call.
  std::vector<std::unique_ptr<DeviceBuffer>> bufs;
  std::vector<CollectiveItem> items(2, CollectiveItem{DType::kF32, ReduceOp::kSum});
  for (int r = 0; r < n_; ++r) {
    bufs.push_back(UploadValues(ids_[r], DType::kF32, std::vector<double>(kCount, r + 1)));
    testing::AddRank(items[r % 2], bufs.back().get(), bufs.back().get());
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllReduce, items, {}).ok());
  for (int r = 0; r < n_; ++r) {
    double want = 0;
    for (int q = r % 2; q < n_; q += 2) want += q + 1;
    EXPECT_EQ(Values(*bufs[r], DType::kF32), std::vector<double>(kCount, want)) << r;
  }
}

TEST_P(EngineConformanceTest, AllGatherConcatenatesInRankOrder) {
  constexpr int64_t kCount = 777;
  std::vector<std::vector<double>> values;
  std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
  CollectiveItem item{DType::kI32};
  for (int r = 0; r < n_; ++r) {
    values.push_back(TestValues(DType::kI32, kCount, static_cast<uint32_t>(r + 3)));
    send.push_back(UploadValues(ids_[r], DType::kI32, values.back()));
    recv.push_back(std::move(*backend_->Allocate(ids_[r], n_ * kCount * 4)));
    testing::AddRank(item, send.back().get(), recv.back().get());
  }
  ASSERT_TRUE(engine_->Run(CollectiveKind::kAllGather, {&item, 1}, {}).ok());
  std::vector<double> want;
  for (const auto& v : values) want.insert(want.end(), v.begin(), v.end());
  for (int r = 0; r < n_; ++r) EXPECT_EQ(Values(*recv[r], DType::kI32), want) << r;
}

TEST_P(EngineConformanceTest, ReduceScatterGivesEachRankItsBlock) {
  constexpr int64_t kBlock = 501;
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax}) {
    std::vector<std::vector<double>> values;
    std::vector<std::unique_ptr<DeviceBuffer>> send, recv;
    CollectiveItem item{DType::kF64, op};
    for (int r = 0; r < n_; ++r) {
      values.push_back(TestValues(DType::kF64, n_ * kBlock, static_cast<uint32_t>(r + 40)));
      send.push_back(UploadValues(ids_[r], DType::kF64, values.back()));
      recv.push_back(std::move(*backend_->Allocate(ids_[r], kBlock * 8)));
      testing::AddRank(item, send.back().get(), recv.back().get());
    }
    ASSERT_TRUE(engine_->Run(CollectiveKind::kReduceScatter, {&item, 1}, {}).ok());
    for (int r = 0; r < n_; ++r) {
      std::vector<double> got = Values(*recv[r], DType::kF64);
      for (int64_t i = 0; i < kBlock; ++i) {
        std::vector<double> column;
        for (int q = 0; q < n_; ++q) column.push_back(values[q][r * kBlock + i]);
        ASSERT_TRUE(Near(DType::kF64, got[i], Reference(DType::kF64, op, column)))
            << ReduceOpName(op) << " rank " << r << " i=" << i;
      }
    }
  }
}

TEST_P(EngineConformanceTest, BroadcastFromEveryRoot) {
  constexpr int64_t kCount = 640;
  for (int root = 0; root < n_; ++root) {
    std::vector<std::unique_ptr<DeviceBuffer>> bufs;
    std::vector<std::vector<double>> values;
    CollectiveItem item{DType::kF32};
    item.root = root;
    for (int r = 0; r < n_; ++r) {
      values.push_back(TestValues(DType::kF32, kCount, static_cast<uint32_t>(r + 90)));
      bufs.push_back(UploadValues(ids_[r], DType::kF32, values.back()));
      testing::AddRank(item, bufs.back().get(), bufs.back().get());
    }
    ASSERT_TRUE(engine_->Run(CollectiveKind::kBroadcast, {&item, 1}, {}).ok());
    for (int r = 0; r < n_; ++r) EXPECT_EQ(Values(*bufs[r], DType::kF32), values[root]) << r;
  }
}

TEST_P(EngineConformanceTest, RejectsInconsistentItemsAndHonoursTheContext) {
  auto a = backend_->Allocate(ids_[0], 64), b = backend_->Allocate(ids_[1], 60);
  ASSERT_TRUE(a.ok() && b.ok());
  CollectiveItem mismatched{DType::kF32};
  testing::AddRank(mismatched, a->get(), a->get());
  testing::AddRank(mismatched, b->get(), b->get());
  absl::Status s = engine_->Run(CollectiveKind::kAllReduce, {&mismatched, 1}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("60 bytes, expected 64"));

  CollectiveItem missing_rank{DType::kF32};
  testing::AddRank(missing_rank, a->get(), a->get());
  missing_rank.group.push_back(ids_[1]);  // rank 1 belongs to the group but nobody gives it
  s = engine_->Run(CollectiveKind::kAllReduce, {&missing_rank, 1}, {});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;

  auto c = backend_->Allocate(ids_[1], 64);
  CollectiveItem ok{DType::kF32};
  testing::AddRank(ok, a->get(), a->get());
  testing::AddRank(ok, c->get(), c->get());
  CollectiveContext late;
  late.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&ok, 1}, late).code(),
            absl::StatusCode::kDeadlineExceeded);
  CollectiveContext cancelled;
  cancelled.cancelled = [] { return true; };
  EXPECT_EQ(engine_->Run(CollectiveKind::kAllReduce, {&ok, 1}, cancelled).code(),
            absl::StatusCode::kCancelled);
  EXPECT_TRUE(engine_->Run(CollectiveKind::kAllReduce, {&ok, 1}, {}).ok());
}

INSTANTIATE_TEST_SUITE_P(Platforms, BackendConformanceTest,
                         ::testing::ValuesIn(RegisteredPlatforms()), PlatformName);
INSTANTIATE_TEST_SUITE_P(Platforms, EngineConformanceTest,
                         ::testing::ValuesIn(RegisteredPlatforms()), PlatformName);

}  // namespace
}  // namespace placement::server::conformance
