// CudaBackend on a real GPU: enumeration, accounting, H2D / D2H / D2D runs.
// Skips when no GPU is usable.
#include "server/platform/cuda/cuda_backend.h"

#include <cuda_runtime_api.h>

#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
    auto backend = CudaBackend::Create({});
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = std::move(*backend);
  }
  std::unique_ptr<CudaBackend> backend_;
};

TEST_F(CudaBackendTest, DescribesGpus) {
  ASSERT_FALSE(backend_->Devices().empty());
  for (const DeviceDescription& d : backend_->Devices()) {
    EXPECT_EQ(d.platform, "gpu");
    EXPECT_FALSE(d.device_kind.empty());
    EXPECT_GT(d.memory_total_bytes, 0);
    EXPECT_GT(d.memory_limit_bytes, 0);
    EXPECT_LE(d.memory_limit_bytes, d.memory_total_bytes);
    EXPECT_FALSE(d.compute_capability.empty());
    EXPECT_FALSE(d.pci_bus_id.empty());
    EXPECT_GT(d.multiprocessor_count, 0);
    EXPECT_EQ(d.hardware_type, DetectHardwareType("gpu", d.device_kind));
  }
}

TEST_F(CudaBackendTest, AccountingAndCopies) {
  const int64_t id = backend_->Devices()[0].id;
  constexpr int64_t kBytes = 1 << 20;
  {
    auto a = backend_->Allocate(id, kBytes);
    auto b = backend_->Allocate(id, kBytes);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(backend_->MemoryInUse(id), 2 * kBytes);
    std::vector<uint8_t> host(kBytes), back(kBytes, 0);
    std::iota(host.begin(), host.end(), 0);
    ASSERT_TRUE(backend_->WriteBytes(host.data(), **a, 0, kBytes).ok());
    // Swap halves on the way to b.
    std::vector<ByteRun> runs = {{0, kBytes / 2, kBytes / 2}, {kBytes / 2, 0, kBytes / 2}};
    ASSERT_TRUE(backend_->Copy(**a, **b, runs).ok());
    ASSERT_TRUE(backend_->ReadBytes(**b, 0, back.data(), kBytes).ok());
    for (int64_t i = 0; i < kBytes; ++i) {
      ASSERT_EQ(back[i], host[(i + kBytes / 2) % kBytes]) << i;
    }
  }
  EXPECT_EQ(backend_->MemoryInUse(id), 0);
  const int64_t limit = backend_->Devices()[0].memory_limit_bytes;
  EXPECT_EQ(backend_->Allocate(id, limit + 1).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(CudaLogicalDevicesTest, EachGpuSplitsIntoBudgetedDevices) {
  std::string reason;
  if (!CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
  CudaBackendOptions options;
  options.logical_devices_per_gpu = 4;
  options.device_memory_bytes = int64_t{64} << 20;
  auto backend = CudaBackend::Create(options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  const auto& devices = (*backend)->Devices();
  ASSERT_EQ(devices.size() % 4, 0u);
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(devices[i].id, static_cast<int64_t>(i));
    EXPECT_EQ(devices[i].local_index, static_cast<int32_t>(i));
    EXPECT_EQ(devices[i].memory_limit_bytes, int64_t{64} << 20);
    EXPECT_EQ((*backend)->Ordinal(devices[i].id), static_cast<int>(i / 4));
    EXPECT_EQ(devices[i].pci_bus_id, devices[i - i % 4].pci_bus_id);
  }
  // Budgets and accounting are per logical device.
  auto a = (*backend)->Allocate(0, int64_t{48} << 20);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*backend)->Allocate(0, int64_t{32} << 20).status().code(),
            absl::StatusCode::kResourceExhausted);
  auto b = (*backend)->Allocate(1, int64_t{48} << 20);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*backend)->MemoryInUse(0), int64_t{48} << 20);
  EXPECT_EQ((*backend)->MemoryInUse(1), int64_t{48} << 20);
  EXPECT_EQ((*backend)->MemoryInUse(2), 0);
  // Copies between logical devices of one GPU.
  std::vector<uint8_t> host(4096), back(4096, 0);
  std::iota(host.begin(), host.end(), 7);
  ASSERT_TRUE((*backend)->WriteBytes(host.data(), **a, 0, 4096).ok());
  ByteRun run{0, 100, 4096};
  ASSERT_TRUE((*backend)->Copy(**a, **b, {&run, 1}).ok());
  ASSERT_TRUE((*backend)->ReadBytes(**b, 100, back.data(), 4096).ok());
  EXPECT_EQ(back, host);
  a->reset();
  b->reset();
  EXPECT_EQ((*backend)->MemoryInUse(0), 0);
  EXPECT_EQ((*backend)->MemoryInUse(1), 0);
}

TEST(CudaLogicalDevicesTest, BadOptionsNameTheNumbers) {
  std::string reason;
  if (!CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
  CudaBackendOptions zero;
  zero.logical_devices_per_gpu = 0;
  EXPECT_EQ(CudaBackend::Create(zero).status().message(),
            "logical devices per GPU must be in [1, 1024], got 0");
  CudaBackendOptions huge;
  huge.logical_devices_per_gpu = 2;
  huge.device_memory_bytes = int64_t{1} << 50;
  absl::Status s = CudaBackend::Create(huge).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              ::testing::StartsWith("device memory 1125899906842624 bytes x 2 logical devices "
                                    "exceeds the "));
}

// Several daemons on one host each own their GPUs (--cuda_gpus).
TEST(CudaGpuSubsetTest, ABackendOwnsOnlyTheGpusItWasGiven) {
  std::string reason;
  if (!CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
  int count = 0;
  cudaGetDeviceCount(&count);
  CudaBackendOptions last;
  last.gpus = {count - 1};
  last.logical_devices_per_gpu = 2;
  last.process_index = 3;
  auto backend = CudaBackend::Create(last);
  ASSERT_TRUE(backend.ok()) << backend.status();
  ASSERT_EQ((*backend)->Devices().size(), 2u);
  for (int k = 0; k < 2; ++k) {
    const DeviceDescription& d = (*backend)->Devices()[k];
    EXPECT_EQ(d.local_index, k);
    EXPECT_EQ(d.id, 3 * kMaxLocalDevices + k);
    EXPECT_EQ((*backend)->Ordinal(d.id), count - 1);
  }
  CudaBackendOptions missing;
  missing.gpus = {count};
  EXPECT_EQ(CudaBackend::Create(missing).status().message(),
            absl::StrCat("GPU ", count, " does not exist; the CUDA runtime reports ", count,
                         " (0..", count - 1, ")"));
  CudaBackendOptions twice;
  twice.gpus = {0, 0};
  EXPECT_EQ(CudaBackend::Create(twice).status().message(), "GPU 0 is listed twice");
}

}  // namespace
}  // namespace placement::server
