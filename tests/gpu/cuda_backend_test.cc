// CudaBackend on a real GPU: enumeration, accounting, H2D / D2H / D2D runs.
// Skips when no GPU is usable.
#include "server/device/cuda/cuda_backend.h"

#include <numeric>
#include <vector>

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

}  // namespace
}  // namespace placement::server
