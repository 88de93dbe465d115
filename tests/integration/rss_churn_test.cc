// The daemon's host memory stays bounded by its device budget under an
// upload/delete churn of varying sizes (docs/security.md, "Bounded
// resources"): freed blocks are cached only within each device's budget
// (server/device/budgeted_backend.h), so the daemon's resident set -- read
// from /proc/<pid>/status, not from what it reports -- stays within
//   RSS at start + sum of device budgets + kSlackBytes,
// where kSlackBytes covers gRPC's per-stream buffers, one upload chunk in
// flight and allocator bookkeeping. Before the cache was counted against the
// budget this churn held about twice the budget.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/tensors.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using client::DType;
using client::HostArray;
using client::Placement;
using testing::DaemonProcess;

constexpr int64_t kMiB = 1 << 20;
constexpr int64_t kDeviceBudget = 64 * kMiB;
constexpr int kDevices = 2;
constexpr int64_t kSlackBytes = 64 * kMiB;  // documented in docs/security.md

// VmRSS of `pid` in bytes, or -1.
int64_t ResidentBytes(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmRSS:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, " kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(rest, &kib)) return kib * 1024;
  }
  return -1;
}

TEST(RssChurnTest, ResidentMemoryStaysWithinTheBudgetUnderUploadDeleteChurn) {
  auto daemon = DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", absl::StrCat("--cpu_devices=", kDevices),
                       absl::StrCat("--cpu_device_memory=", kDeviceBudget)}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto c = (*daemon)->Connect();
  ASSERT_TRUE(c.ok()) << c.status();
  client::TensorClient tensors(**c);

  // One small round first, so gRPC's own buffers are part of the baseline.
  std::vector<uint8_t> bytes(24 * kMiB, 0x5a);
  {
    auto warm =
        tensors.Upload(HostArray{DType::kU8, {4096}, {bytes.data(), 4096}}, Placement::Device(0));
    ASSERT_TRUE(warm.ok()) << warm.status();
    ASSERT_TRUE(tensors.Delete({warm->id}).ok());
  }
  const int64_t baseline = ResidentBytes((*daemon)->pid());
  ASSERT_GT(baseline, 0);

  // Sizes from 4 KiB to 24 MiB in a fixed pseudo-random order; at most two
  // live tensors per device, so the budget itself is never the limit.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  std::vector<std::vector<std::string>> live(kDevices);
  int64_t peak = baseline;
  for (int i = 0; i < 240; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t size = 4096 + static_cast<int64_t>((state >> 33) % (24 * kMiB - 4096));
    const int device = i % kDevices;
    if (live[device].size() == 2) {
      ASSERT_TRUE(tensors.Delete({live[device].front()}).ok());
      live[device].erase(live[device].begin());
    }
    auto info =
        tensors.Upload(HostArray{DType::kU8, {size}, {bytes.data(), static_cast<size_t>(size)}},
                       Placement::Device(device));
    ASSERT_TRUE(info.ok()) << "upload " << i << " of " << size << " bytes: " << info.status();
    live[device].push_back(info->id);
    peak = std::max(peak, ResidentBytes((*daemon)->pid()));
  }
  const int64_t bound = baseline + kDevices * kDeviceBudget + kSlackBytes;
  std::cout << "daemon RSS: baseline " << baseline << " bytes, peak " << peak
            << " bytes (peak - baseline = " << (peak - baseline) << ", budget "
            << kDevices * kDeviceBudget << ")\n";
  EXPECT_LE(peak, bound) << "peak RSS " << peak << " bytes, baseline " << baseline << ", budget "
                         << kDevices * kDeviceBudget << ", slack " << kSlackBytes;

  for (auto& ids : live) {
    for (const auto& id : ids) ASSERT_TRUE(tensors.Delete({id}).ok());
  }
  auto devices = (*c)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  for (const auto& d : *devices) {
    EXPECT_EQ(d.memory_in_use_bytes, 0) << "device " << d.id;
    EXPECT_LE(d.memory_in_use_bytes + d.memory_cached_bytes, d.memory_limit_bytes);
  }
}

}  // namespace
}  // namespace placement
