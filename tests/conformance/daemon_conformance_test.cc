// Tensor-level conformance: one real placementd process per registered
// platform (--backend=NAME, the suite's small budgets), driven through the
// client library: devices and memory reporting, sharded upload / download
// round trips, collectives against a float64 reference, budget exhaustion,
// and device memory back at its baseline afterwards. Platforms not usable
// here skip.
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/conformance/conformance_util.h"
#include "tests/testing/daemon_process.h"

namespace placement::server::conformance {
namespace {

using client::HostArray;
using client::Placement;

class DaemonConformanceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const Platform* platform = PlatformRegistry::Global().Find(GetParam());
    ASSERT_NE(platform, nullptr);
    {
      // Usable here? (The daemon would exit 1 otherwise.)
      auto probe = platform->CreateBackend(ConformanceConfig());
      if (absl::IsFailedPrecondition(probe.status())) {
        GTEST_SKIP() << GetParam() << " is not usable here: " << probe.status();
      }
      ASSERT_TRUE(probe.ok()) << probe.status();
    }
    placement::testing::DaemonOptions options;
    options.extra_flags = platform->RequestFlags(ConformanceRequest());
    options.extra_flags.push_back(absl::StrCat("--backend=", GetParam()));
    auto daemon = placement::testing::DaemonProcess::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto connected = daemon_->Connect();
    ASSERT_TRUE(connected.ok()) << connected.status();
    client_ = std::move(*connected);
    tensors_ = std::make_unique<client::TensorClient>(*client_);
    meshes_ = std::make_unique<client::MeshClient>(*client_);
    collectives_ = std::make_unique<client::CollectiveClient>(*client_);
    auto devices = client_->ListDevices();
    ASSERT_TRUE(devices.ok()) << devices.status();
    devices_ = *devices;
    ASSERT_GE(devices_.size(), 2u);
    baseline_ = InUse();
  }

  void TearDown() override {
    if (tensors_ == nullptr) return;
    auto list = tensors_->List();
    ASSERT_TRUE(list.ok());
    std::vector<std::string> ids;
    for (const auto& t : *list) ids.push_back(t.id);
    if (!ids.empty()) ASSERT_TRUE(tensors_->Delete(ids).ok());
    EXPECT_EQ(InUse(), baseline_);
    ExpectWithinBudgets();
  }

  std::vector<int64_t> InUse() const {
    std::vector<int64_t> out;
    auto devices = client_->ListDevices();
    EXPECT_TRUE(devices.ok());
    if (devices.ok()) {
      for (const auto& d : *devices) out.push_back(d.memory_in_use_bytes);
    }
    return out;
  }

  void ExpectWithinBudgets() const {
    auto devices = client_->ListDevices();
    ASSERT_TRUE(devices.ok());
    for (const auto& d : *devices) {
      EXPECT_GE(d.memory_cached_bytes, 0);
      EXPECT_LE(d.memory_in_use_bytes + d.memory_cached_bytes, d.memory_limit_bytes)
          << "device " << d.id;
    }
  }

  absl::StatusOr<client::Mesh> DataMesh() const {
    return meshes_->CreateDataParallel(static_cast<int64_t>(devices_.size()), "data");
  }

  std::vector<float> Floats(const std::string& id, int64_t n) const {
    std::vector<float> out(static_cast<size_t>(n));
    auto header = tensors_->Download(id, client::AsWritableBytes(out));
    EXPECT_TRUE(header.ok()) << header.status();
    return out;
  }

  std::unique_ptr<placement::testing::DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::TensorClient> tensors_;
  std::unique_ptr<client::MeshClient> meshes_;
  std::unique_ptr<client::CollectiveClient> collectives_;
  std::vector<client::Device> devices_;
  std::vector<int64_t> baseline_;
};

TEST_P(DaemonConformanceTest, ListsDevicesWithBudgetsAndConsecutiveIds) {
  for (size_t i = 0; i < devices_.size(); ++i) {
    EXPECT_EQ(devices_[i].id, devices_[0].id + static_cast<int64_t>(i));
    EXPECT_EQ(devices_[i].local_index, static_cast<int32_t>(i));
    EXPECT_EQ(devices_[i].memory_limit_bytes, kDeviceBudget);
  }
  ExpectWithinBudgets();
}

TEST_P(DaemonConformanceTest, ShardedUploadDownloadRoundTrip) {
  auto mesh = DataMesh();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const int64_t n = static_cast<int64_t>(devices_.size());
  const std::vector<int64_t> shape = {n * 1000, 3};
  std::vector<float> values(static_cast<size_t>(shape[0] * shape[1]));
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 7.0f;
  auto info = tensors_->Upload(HostArray::Of(values, shape), Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(static_cast<int64_t>(info->shards.size()), n);
  EXPECT_EQ(Floats(info->id, static_cast<int64_t>(values.size())), values);
  std::vector<int64_t> in_use = InUse();
  for (size_t d = 0; d < in_use.size(); ++d) {
    EXPECT_EQ(in_use[d] - baseline_[d], 1000 * 3 * 4) << "device " << d;
  }
  // Replicated: every device gets the whole tensor.
  auto replicated = tensors_->Place(info->id, Placement::Replicated(*mesh));
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(Floats(replicated->id, static_cast<int64_t>(values.size())), values);
}

TEST_P(DaemonConformanceTest, CollectivesMatchTheReference) {
  auto mesh = DataMesh();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const int n = static_cast<int>(devices_.size());
  constexpr int64_t kCount = 4200;  // divisible by every device count up to 8
  // One summand per device, assembled as a Partial('data') tensor.
  auto partial = [&](client::ReduceOp op) -> absl::StatusOr<client::TensorInfo> {
    std::vector<std::string> ids;
    for (int p = 0; p < n; ++p) {
      std::vector<float> piece(kCount);
      for (int64_t i = 0; i < kCount; ++i) piece[i] = static_cast<float>((p + 1) * (i % 7));
      auto info =
          tensors_->Upload(HostArray::Of(piece, {kCount}), Placement::Device(mesh->device_ids[p]));
      if (!info.ok()) return info.status();
      ids.push_back(info->id);
    }
    return tensors_->Assemble({kCount}, Placement::Sharded(*mesh, {}).WithPartial({"data"}, op),
                              ids, client::SourceHandling::kDonate);
  };
  const double ranks_sum = n * (n + 1) / 2.0;
  for (const std::string op : {"sum", "mean", "max"}) {
    auto input = partial(client::ReduceOp::kSum);
    ASSERT_TRUE(input.ok()) << input.status();
    auto reduced = collectives_->AllReduce(input->id, op, {.axes = {"data"}});
    ASSERT_TRUE(reduced.ok()) << op << ": " << reduced.status();
    std::vector<float> got = Floats(reduced->id, kCount);
    for (int64_t i = 0; i < kCount; ++i) {
      const double base = static_cast<double>(i % 7);
      const double want = op == "sum"    ? ranks_sum * base
                          : op == "mean" ? ranks_sum * base / n
                                         : n * base;
      ASSERT_NEAR(got[i], want, 1e-4 * std::max(1.0, want)) << op << " i=" << i;
    }
    ASSERT_TRUE(tensors_->Delete({input->id, reduced->id}).ok());
  }
  // Reduce-scatter of the partial tensor along dim 0, then all-gather back.
  auto input = partial(client::ReduceOp::kSum);
  ASSERT_TRUE(input.ok());
  const int64_t padded = kCount - kCount % n;  // ReduceScatter needs a divisible extent
  if (padded == kCount) {
    auto scattered = collectives_->ReduceScatter(input->id, client::ReduceOp::kSum, 0);
    ASSERT_TRUE(scattered.ok()) << scattered.status();
    auto gathered = collectives_->AllGather(scattered->id, 0);
    ASSERT_TRUE(gathered.ok()) << gathered.status();
    std::vector<float> got = Floats(gathered->id, kCount);
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], ranks_sum * (i % 7)) << i;
  }
  // Broadcast from the last device of the mesh: its summand everywhere.
  auto bcast = collectives_->Broadcast(input->id, mesh->device_ids[n - 1], {.axes = {"data"}});
  ASSERT_TRUE(bcast.ok()) << bcast.status();
  std::vector<float> got = Floats(bcast->id, kCount);
  for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], n * (i % 7)) << i;
}

TEST_P(DaemonConformanceTest, ExhaustedBudgetFailsCleanly) {
  const int64_t too_many = kDeviceBudget / 4 + 1;  // f32 elements: one more byte than the budget
  std::vector<float> values(static_cast<size_t>(too_many), 1.0f);
  auto info =
      tensors_->Upload(HostArray::Of(values, {too_many}), Placement::Device(devices_[0].id));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kResourceExhausted) << info.status();
  EXPECT_EQ(InUse(), baseline_);
  // The budget is still there in full afterwards: a tensor of all of it but
  // one page fits (a buffer is charged its block and, where device memory is
  // host memory, a per-buffer overhead of under a page; BudgetedBackend).
  const int64_t fitting = (kDeviceBudget - 4096) / 4;
  std::vector<float> fits(static_cast<size_t>(fitting), 2.0f);
  auto ok = tensors_->Upload(HostArray::Of(fits, {fitting}), Placement::Device(devices_[0].id));
  ASSERT_TRUE(ok.ok()) << ok.status();
  ExpectWithinBudgets();
}

INSTANTIATE_TEST_SUITE_P(Platforms, DaemonConformanceTest,
                         ::testing::ValuesIn(RegisteredPlatforms()), PlatformName);

}  // namespace
}  // namespace placement::server::conformance
