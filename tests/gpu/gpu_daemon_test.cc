// placementd as a process on a real GPU: --backend=auto picks CUDA and
// describes the card as the driver does, with the seed's row for its
// hardware type; the device memory the driver sees (cudaMemGetInfo) agrees
// with the daemon's accounting; running out of device memory in the middle
// of a reshard leaves the source intact and nothing held. Skips without a GPU.
#include <cuda_runtime_api.h>

#include <numeric>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/hardware.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/placement.h"
#include "server/platform/cuda/cuda_backend.h"
#include "tests/testing/daemon_process.h"

namespace placement::client {
namespace {

using testing::DaemonProcess;

constexpr int64_t kMiB = int64_t{1} << 20;

class GpuDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    if (!server::CudaDevicesPresent(&reason)) GTEST_SKIP() << "no GPU: " << reason;
    ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  }

  std::unique_ptr<DaemonProcess> Start(std::vector<std::string> flags) {
    auto daemon = DaemonProcess::Start({.extra_flags = std::move(flags)});
    EXPECT_TRUE(daemon.ok()) << daemon.status();
    if (!daemon.ok()) return nullptr;
    client_ = std::move(*(*daemon)->Connect());
    tensors_ = std::make_unique<TensorClient>(*client_);
    return std::move(*daemon);
  }

  // Bytes of GPU 0 in use by anyone, as the driver reports them.
  static int64_t DriverUsed() {
    size_t free_bytes = 0, total_bytes = 0;
    EXPECT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
    return static_cast<int64_t>(total_bytes - free_bytes);
  }

  int64_t InUse(int64_t device) {
    auto devices = client_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.status();
    return devices.ok() ? (*devices)[device].memory_in_use_bytes : -1;
  }

  std::unique_ptr<Client> client_;
  std::unique_ptr<TensorClient> tensors_;
};

TEST_F(GpuDaemonTest, AutoSelectsCudaAndDescribesTheCard) {
  auto daemon = Start({"--backend=auto"});
  ASSERT_NE(daemon, nullptr);
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, i), cudaSuccess);
    char bus_id[32] = {0};
    ASSERT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), i), cudaSuccess);
    const Device& d = (*devices)[i];
    EXPECT_EQ(d.platform, "gpu");
    EXPECT_EQ(d.device_kind, prop.name);
    EXPECT_EQ(d.compute_capability, absl::StrCat(prop.major, ".", prop.minor));
    EXPECT_EQ(d.multiprocessor_count, prop.multiProcessorCount);
    EXPECT_EQ(d.pci_bus_id, bus_id);
    EXPECT_EQ(d.memory_total_bytes, static_cast<int64_t>(prop.totalGlobalMem));
    EXPECT_GT(d.memory_limit_bytes, 0);
    EXPECT_LT(d.memory_limit_bytes, d.memory_total_bytes);
    const placement::HardwareType type = DetectHardwareType("gpu", prop.name);
    EXPECT_EQ(*HardwareTypeFromProtoValue(static_cast<int>(d.hardware_type)), type) << prop.name;
    if (absl::StrContains(prop.name, "H100")) {
      EXPECT_EQ(d.hardware_type, HardwareType::kH100);
      EXPECT_EQ(d.compute_capability, "9.0");
    }
    if (absl::StrContains(prop.name, "H200")) EXPECT_EQ(d.hardware_type, HardwareType::kH200);
  }
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->backend, "cuda");

  // The seed's table row for the detected card.
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const placement::HardwareType type = DetectHardwareType("gpu", prop.name);
  auto info = client_->GetDeviceInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(HardwareTypeName(info->hardware_type), placement::HardwareTypeName(type));
  auto row = client_->GetBatchSizeRecommendation();
  ASSERT_TRUE(row.ok()) << row.status();
  const placement::BatchSizeRecommendation expected = placement::GetBatchSizeRecommendation(type);
  EXPECT_EQ(row->min_batch_size, expected.min_batch_size);
  EXPECT_EQ(row->optimal_batch_size, expected.optimal_batch_size);
  EXPECT_EQ(row->critical_batch_size, expected.critical_batch_size);
  if (type == placement::HardwareType::kH100) {  // the seed's H100 row
    EXPECT_EQ(row->min_batch_size, 64);
    EXPECT_EQ(row->optimal_batch_size, 320);
    EXPECT_EQ(row->critical_batch_size, 298);
  }
}

TEST_F(GpuDaemonTest, DeviceMemoryAgreesWithTheDriver) {
  const int64_t before_daemon = DriverUsed();
  {
    auto daemon = Start({"--backend=cuda"});
    ASSERT_NE(daemon, nullptr);
    const int64_t baseline = DriverUsed();
    constexpr int64_t kBytes = 256 * kMiB;
    std::vector<float> values(kBytes / 4);
    std::iota(values.begin(), values.end(), 0.0f);
    auto first = tensors_->Upload(HostArray::Of(values, {kBytes / 4}), Placement::Device(0));
    ASSERT_TRUE(first.ok()) << first.status();
    EXPECT_EQ(InUse(0), kBytes);
    // What the driver lost is what we account, plus at most the 2 MiB
    // allocation granule and the copy stream's own small state.
    const int64_t grown = DriverUsed() - baseline;
    EXPECT_GE(grown, kBytes);
    EXPECT_LE(grown, kBytes + 16 * kMiB);
    ASSERT_TRUE(tensors_->Delete({first->id}).ok());
    EXPECT_EQ(InUse(0), 0);
    // The freed block stays cached on the GPU and serves the next upload of
    // the size: no new cudaMalloc.
    auto second = tensors_->Upload(HostArray::Of(values, {kBytes / 4}), Placement::Device(0));
    ASSERT_TRUE(second.ok()) << second.status();
    EXPECT_EQ(InUse(0), kBytes);
    EXPECT_EQ(DriverUsed() - baseline, grown);
    ASSERT_TRUE(tensors_->Delete({second->id}).ok());
    EXPECT_EQ(InUse(0), 0);
    client_.reset();
    tensors_.reset();
    EXPECT_EQ(daemon->Stop(SIGTERM), 0);
  }
  // The daemon's process gave everything back to the driver.
  EXPECT_LE(DriverUsed(), before_daemon);
}

TEST_F(GpuDaemonTest, OutOfMemoryMidReshardLeavesTheSourceIntact) {
  // Two logical devices of GPU 0 with 64 MiB each: replicating a 40 MiB
  // tensor that already sits on device 0 cannot fit there.
  auto daemon =
      Start({"--backend=cuda", "--cuda_logical_devices=2", "--cuda_device_memory=67108864"});
  ASSERT_NE(daemon, nullptr);
  MeshClient meshes(*client_);
  auto mesh = meshes.Create({{"data", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> values(40 * kMiB / 4);
  std::iota(values.begin(), values.end(), 1.0f);
  auto source = tensors_->Upload(HostArray::Of(values, {static_cast<int64_t>(values.size())}),
                                 Placement::Device(0));
  ASSERT_TRUE(source.ok()) << source.status();
  auto replicated = tensors_->Place(source->id, Placement::Replicated(*mesh));
  ASSERT_EQ(replicated.status().code(), absl::StatusCode::kResourceExhausted)
      << replicated.status();
  EXPECT_TRUE(absl::StrContains(replicated.status().message(), "device 0")) << replicated.status();
  EXPECT_EQ(InUse(0), 40 * kMiB);
  EXPECT_EQ(InUse(1), 0);
  std::vector<float> back(values.size());
  ASSERT_TRUE(tensors_->Download(source->id, AsWritableBytes(back)).ok());
  EXPECT_EQ(back, values);
  // Sharding it instead fits (20 MiB more on each device).
  auto moved = tensors_->Place(source->id, Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(moved.ok()) << moved.status();
  ASSERT_TRUE(tensors_->Download(moved->id, AsWritableBytes(back)).ok());
  EXPECT_EQ(back, values);
  ASSERT_TRUE(tensors_->Delete({source->id, moved->id}).ok());
  EXPECT_EQ(InUse(0), 0);
  EXPECT_EQ(InUse(1), 0);
}

}  // namespace
}  // namespace placement::client
