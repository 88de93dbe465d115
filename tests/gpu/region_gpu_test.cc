// Same-host regions on a real GPU (label `gpu`; skips without one): host
// memory registered with CudaBackend::RegisterHostMemory is copied by one
// DMA each way, skipping the staging buffers; a daemon with --backend=cuda
// pins the regions clients register (RegionInfo.pinned) and moves sharded
// tensors through them byte for byte.
#include <sys/mman.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "placement/client/regions.h"
#include "placement/client/tensors.h"
#include "server/platform/cuda/cuda_backend.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

class RegionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!server::CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
  }
};

TEST_F(RegionGpuTest, RegisteredHostMemoryRoundTripsWithoutStaging) {
  auto backend = server::CudaBackend::Create({});
  ASSERT_TRUE(backend.ok()) << backend.status();
  constexpr int64_t kBytes = int64_t{32} << 20;  // several staging buffers' worth
  void* host = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(host, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(host);
  for (int64_t i = 0; i < kBytes; ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE((*backend)->RegisterHostMemory(host, kBytes).ok());
  const int64_t id = (*backend)->Devices()[0].id;
  {
    auto buffer = (*backend)->Allocate(id, kBytes);
    ASSERT_TRUE(buffer.ok());
    ASSERT_TRUE((*backend)->WriteBytes(host, **buffer, 0, kBytes).ok());
    std::vector<uint8_t> expected(bytes, bytes + kBytes);
    std::memset(host, 0, kBytes);
    // Two runs, swapped halves, straight into the registered memory.
    std::vector<server::ByteRun> runs = {{0, kBytes / 2, kBytes / 2}, {kBytes / 2, 0, kBytes / 2}};
    ASSERT_TRUE((*backend)->Read(**buffer, host, runs).ok());
    for (int64_t i = 0; i < kBytes; i += 4093) {
      ASSERT_EQ(bytes[i], expected[(i + kBytes / 2) % kBytes]) << i;
    }
  }
  (*backend)->UnregisterHostMemory(host);
  munmap(host, kBytes);
}

TEST_F(RegionGpuTest, DaemonPinsRegionsAndMovesShardedTensorsThroughThem) {
  auto daemon = testing::DaemonProcess::Start(
      {.extra_flags = {"--backend=cuda", "--cuda_logical_devices=4"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  constexpr int64_t kBytes = int64_t{64} << 20;
  auto region = client::SharedRegion::Create(**client, 2 * kBytes, "gpu-region");
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_TRUE((*region)->info().pinned);
  uint8_t* data = (*region)->data();
  for (int64_t i = 0; i < kBytes; ++i) data[i] = static_cast<uint8_t>(i * 13 + 1);
  auto mesh = client::MeshClient(**client).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  client::TensorClient tensors(**client);
  auto info = tensors.UploadFromRegion(**region, 0, client::DType::kF32, {kBytes / 4},
                                       client::Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  auto header = tensors.DownloadToRegion(info->id, **region, kBytes);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_EQ(std::memcmp(data, data + kBytes, kBytes), 0);
  ASSERT_TRUE(tensors.Delete({info->id}).ok());
}

}  // namespace
}  // namespace placement
