// The tensor round trips of the CPU suite, on a daemon with --backend=cuda:
// every dtype on one GPU, sharded and replicated over all GPUs, reshard
// chains back to the original bytes, memory back to the baseline. Skips when
// the daemon cannot start on CUDA (no GPU).
#include <random>

#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/testing/daemon_process.h"

namespace placement::client {
namespace {

class TensorGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::DaemonOptions options;
    options.extra_flags = {"--backend=cuda"};
    auto daemon = testing::DaemonProcess::Start(options);
    if (!daemon.ok()) GTEST_SKIP() << "no CUDA daemon: " << daemon.status();
    daemon_ = std::move(*daemon);
    client_ = std::move(*daemon_->Connect());
    tensors_ = std::make_unique<TensorClient>(*client_);
    auto devices = client_->ListDevices();
    ASSERT_TRUE(devices.ok());
    num_devices_ = static_cast<int64_t>(devices->size());
    ASSERT_GT(num_devices_, 0);
    EXPECT_EQ((*devices)[0].platform, "gpu");
  }

  int64_t InUse() {
    int64_t total = 0;
    for (const auto& d : *client_->ListDevices()) total += d.memory_in_use_bytes;
    return total;
  }

  std::vector<uint8_t> RandomBytes(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(static_cast<size_t>(n));
    for (auto& b : out) b = static_cast<uint8_t>(rng());
    return out;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<TensorClient> tensors_;
  int64_t num_devices_ = 0;
};

TEST_F(TensorGpuTest, EveryDtypeRoundTripsOnOneGpu) {
  const int64_t baseline = InUse();
  for (DType dtype : {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8, DType::kI16,
                      DType::kI32, DType::kI64, DType::kU8}) {
    const std::vector<int64_t> shape = {257, 129};
    auto bytes = RandomBytes(*ExpectedBytes(dtype, shape), static_cast<uint32_t>(dtype));
    auto info = tensors_->Upload(HostArray{dtype, shape, bytes}, Placement::Device(0));
    ASSERT_TRUE(info.ok()) << info.status();
    auto back = tensors_->DownloadBytes(info->id);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->bytes, bytes) << DTypeName(dtype);
    ASSERT_TRUE(tensors_->Delete({info->id}).ok());
  }
  EXPECT_EQ(InUse(), baseline);
}

TEST_F(TensorGpuTest, ShardedReplicatedAndReshardChains) {
  const int64_t baseline = InUse();
  MeshClient meshes(*client_);
  auto mesh = meshes.Create({{"data", num_devices_}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::vector<int64_t> shape = {num_devices_ * 64, 48};
  std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
  std::mt19937 rng(7);
  for (auto& v : values) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  auto sharded =
      tensors_->Upload(HostArray::Of(values, shape), Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  auto replicated = tensors_->Place(sharded->id, Placement::Replicated(*mesh));
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  auto columns = tensors_->Place(replicated->id, Placement::Sharded(*mesh, {{}, {"data"}}),
                                 SourceHandling::kDonate);
  ASSERT_TRUE(columns.ok()) << columns.status();
  auto single = tensors_->Place(columns->id, Placement::Device(num_devices_ - 1));
  ASSERT_TRUE(single.ok()) << single.status();
  for (const std::string& id : {sharded->id, columns->id, single->id}) {
    std::vector<float> back(values.size());
    ASSERT_TRUE(tensors_->Download(id, AsWritableBytes(back)).ok());
    EXPECT_EQ(back, values) << id;
  }
  ASSERT_TRUE(tensors_->Delete({sharded->id, columns->id, single->id}).ok());
  ASSERT_TRUE(meshes.Delete(mesh->id).ok());
  EXPECT_EQ(InUse(), baseline);
}

}  // namespace
}  // namespace placement::client
