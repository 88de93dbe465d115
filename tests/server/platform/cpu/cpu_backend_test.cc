#include "server/platform/cpu/cpu_backend.h"

#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<CpuBackend> MakeBackend(int devices, int64_t budget) {
  CpuBackendOptions options;
  options.num_devices = devices;
  options.device_memory_bytes = budget;
  auto backend = CpuBackend::Create(options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return std::move(*backend);
}

TEST(CpuBackendTest, DescribesVirtualDevices) {
  auto backend = MakeBackend(4, 1 << 20);
  ASSERT_EQ(backend->Devices().size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const DeviceDescription& d = backend->Devices()[i];
    EXPECT_EQ(d.id, i);
    EXPECT_EQ(d.local_index, i);
    EXPECT_EQ(d.platform, "cpu");
    EXPECT_EQ(d.device_kind, "cpu");
    EXPECT_EQ(d.hardware_type, HardwareType::kCpu);
    EXPECT_EQ(d.memory_limit_bytes, 1 << 20);
  }
  EXPECT_EQ(backend->Name(), "cpu");
  EXPECT_TRUE(backend->HostAddressable());
}

TEST(CpuBackendTest, ProcessIndexOffsetsGlobalIds) {
  CpuBackendOptions options;
  options.num_devices = 2;
  options.device_memory_bytes = 1 << 20;
  options.process_index = 3;
  auto backend = CpuBackend::Create(options);
  ASSERT_TRUE(backend.ok());
  EXPECT_EQ((*backend)->Devices()[1].id, 3 * kMaxLocalDevices + 1);
  EXPECT_TRUE((*backend)->Allocate(3 * kMaxLocalDevices + 1, 16).ok());
  EXPECT_EQ((*backend)->Allocate(1, 16).status().code(), absl::StatusCode::kNotFound);
}

TEST(CpuBackendTest, InvalidOptions) {
  CpuBackendOptions options;
  options.num_devices = 0;
  auto backend = CpuBackend::Create(options);
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(backend.status().message()), HasSubstr("got 0"));
  options.num_devices = 2;
  options.device_memory_bytes = -1;
  EXPECT_EQ(CpuBackend::Create(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, ExactAccountingAndRelease) {
  // Budgets are charged whole pages plus the per-buffer overhead.
  const int64_t charge = 4096 + kCpuBufferOverheadBytes;
  auto backend = MakeBackend(2, 2 * charge + 1000);
  {
    auto a = backend->Allocate(0, 600);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(backend->MemoryInUse(0), 600);
    EXPECT_EQ(backend->MemoryCharged(0), charge);
    EXPECT_EQ(backend->MemoryInUse(1), 0);
    auto b = backend->Allocate(0, 8000);  // two pages: does not fit beside a
    ASSERT_EQ(b.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_THAT(std::string(b.status().message()),
                HasSubstr(absl::StrCat("cannot allocate 8000 bytes (charged ", 4096 + charge,
                                       ": a 8192-byte block and ", kCpuBufferOverheadBytes,
                                       " bytes of host overhead); ", charge, " of ",
                                       2 * charge + 1000, " bytes charged (600 in use)")));
    EXPECT_EQ(backend->MemoryInUse(0), 600);
    auto c = backend->Allocate(0, 400);
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(backend->MemoryInUse(0), 1000);
    EXPECT_EQ(backend->MemoryCharged(0), 2 * charge);
  }
  EXPECT_EQ(backend->MemoryInUse(0), 0);
  EXPECT_EQ(backend->MemoryCharged(0), 0);
  auto zero = backend->Allocate(1, 0);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ((*zero)->size(), 0);
  EXPECT_EQ(backend->Allocate(9, 8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(backend->Allocate(0, -1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CpuBackendTest, WriteReadCopyRuns) {
  auto backend = MakeBackend(2, 1 << 16);
  auto a = std::move(*backend->Allocate(0, 64));
  auto b = std::move(*backend->Allocate(1, 64));
  std::vector<uint8_t> host(64);
  for (int i = 0; i < 64; ++i) host[i] = static_cast<uint8_t>(i);
  ASSERT_TRUE(backend->WriteBytes(host.data(), *a, 0, 64).ok());
  // Reverse 8-byte blocks from a into b.
  std::vector<ByteRun> runs;
  for (int i = 0; i < 8; ++i) runs.push_back({i * 8, (7 - i) * 8, 8});
  ASSERT_TRUE(backend->Copy(*a, *b, runs).ok());
  std::vector<uint8_t> out(64);
  ASSERT_TRUE(backend->ReadBytes(*b, 0, out.data(), 64).ok());
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 8; ++j) EXPECT_EQ(out[(7 - i) * 8 + j], i * 8 + j);
  }
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data()) % 4096, 0u);  // whole pages
}

TEST(CpuBackendTest, ConcurrentAllocationsNeverExceedBudget) {
  auto backend = MakeBackend(1, 100 * (4096 + kCpuBufferOverheadBytes));
  std::vector<std::thread> threads;
  std::atomic<int> granted{0};
  std::vector<std::unique_ptr<DeviceBuffer>> kept[8];
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto buffer = backend->Allocate(0, 64);
        if (buffer.ok()) {
          granted++;
          kept[t].push_back(std::move(*buffer));
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(granted.load(), 100);
  EXPECT_EQ(backend->MemoryInUse(0), 100 * 64);
  for (auto& k : kept) k.clear();
  EXPECT_EQ(backend->MemoryInUse(0), 0);
}

}  // namespace
}  // namespace placement::server

namespace placement::server {
namespace {

TEST(CpuBackendCacheTest, FreedBlocksAreReusedWithoutCountingAsInUse) {
  CpuBackendOptions options;
  options.num_devices = 1;
  options.device_memory_bytes = 1 << 20;
  options.cache_bytes_per_device = 64 << 10;
  auto backend = std::move(*CpuBackend::Create(options));
  void* first = nullptr;
  {
    auto a = std::move(*backend->Allocate(0, 10000));
    first = a->data();
  }
  EXPECT_EQ(backend->MemoryInUse(0), 0);
  // Same rounded size (12 KiB): the cached block comes back.
  auto b = std::move(*backend->Allocate(0, 12000));
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(backend->MemoryInUse(0), 12000);
  // Blocks beyond the cache limit are freed, not kept.
  { auto big = std::move(*backend->Allocate(0, 128 << 10)); }
  auto again = std::move(*backend->Allocate(0, 128 << 10));
  EXPECT_EQ(backend->MemoryInUse(0), 12000 + (128 << 10));
}

}  // namespace
}  // namespace placement::server
