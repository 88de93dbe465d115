// The daemon's host memory matches its device budgets and comes back when it
// is idle (docs/operations.md, "Memory"), read from /proc/<pid>/status, not
// from what the daemon reports:
//   - a flood of one-byte tensors on 2 x 8 MiB devices, and of eight-byte
//     tensors replicated over 8 x 8 MiB devices, is charged a page and a
//     record per buffer, refused RESOURCE_EXHAUSTED once the budgets are
//     spent, and the daemon's RSS stays within start + the budgets +
//     kLoadSlack (before: 60,000 one-byte tensors took +312 MiB while 60 KB
//     were "in use", and 40,000 eight-byte ones 1.43 GB);
//   - deleting them all gives the memory back (before: 334 MiB stayed);
//   - after a churn of 4 KiB - 24 MiB uploads, the block cache decays once
//     idle (--device_cache_idle) and RSS returns to within kIdleSlack of the
//     start; under host memory pressure (--host_memory_min_available) the
//     cache is released at once.
// Each test also checks that the daemon keeps serving and its descriptors
// come back.
#include <algorithm>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"

namespace placement {
namespace {

using client::BatchArray;
using client::DType;
using client::HostArray;
using client::Placement;
using testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr int64_t kMiB = 1 << 20;
// Documented in docs/operations.md: gRPC's buffers, chunks in flight,
// allocator bookkeeping beside the budgets under load, and what may stay
// resident once the daemon is idle again.
constexpr int64_t kLoadSlack = 64 * kMiB;
constexpr int64_t kIdleSlack = 16 * kMiB;

struct Daemon {
  std::unique_ptr<DaemonProcess> process;
  std::unique_ptr<client::Client> client;
  std::unique_ptr<client::TensorClient> tensors;
};

Daemon Start(std::vector<std::string> flags) {
  flags.insert(flags.begin(), {"--backend=cpu", "--metrics_listen=127.0.0.1:0"});
  Daemon d;
  auto process = DaemonProcess::Start({.extra_flags = flags});
  EXPECT_TRUE(process.ok()) << process.status();
  if (!process.ok()) return d;
  d.process = *std::move(process);
  auto c = d.process->Connect();
  EXPECT_TRUE(c.ok()) << c.status();
  d.client = *std::move(c);
  d.tensors = std::make_unique<client::TensorClient>(*d.client);
  return d;
}

// The daemon's own resident memory: VmRSS less the pages of client regions
// it maps (RssShmem; the client library's staging regions are the client's).
int64_t Rss(const Daemon& d) { return testing::OwnResidentBytes(d.process->pid()); }

// Polls (bounded) until `done`.
template <typename Done>
bool Eventually(Done done, absl::Duration limit = absl::Seconds(60)) {
  const absl::Time give_up = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() > give_up) return false;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return true;
}

struct Totals {
  int64_t in_use = 0, charged = 0, cached = 0, limit = 0;
};
Totals Devices(const Daemon& d) {
  Totals t;
  // The devices held in a local: a range-for over *StatusOr of a
  // temporary would read the temporary after its end.
  const auto devices = d.client->ListDevices();
  for (const auto& device : devices.value()) {
    t.in_use += device.memory_in_use_bytes;
    t.charged += device.memory_charged_bytes;
    t.cached += device.memory_cached_bytes;
    t.limit += device.memory_limit_bytes;
    EXPECT_LE(device.memory_charged_bytes + device.memory_cached_bytes, device.memory_limit_bytes)
        << "device " << device.id;
  }
  return t;
}

// Uploads tensors of `bytes` each with `rule` -- batches of 256 in one
// stream, then one at a time -- until the daemon refuses one; returns their
// ids and checks the refusal.
std::vector<std::string> FloodUntilRefused(const Daemon& d, int64_t bytes, const client::Rule& rule,
                                           int64_t at_most) {
  std::vector<std::string> ids;
  const std::vector<uint8_t> data(static_cast<size_t>(bytes), 7);
  std::vector<BatchArray> batch;
  for (int i = 0; i < 256; ++i) {
    batch.push_back({absl::StrCat("k", i), HostArray{DType::kU8, {bytes}, data}});
  }
  absl::Status refused;
  while (static_cast<int64_t>(ids.size()) < at_most) {
    auto made = d.tensors->UploadBatch(batch, rule);
    if (!made.ok()) break;  // a batch is all or nothing: go on one by one
    for (const auto& t : *made) ids.push_back(t.tensor.id);
  }
  while (static_cast<int64_t>(ids.size()) < at_most) {
    auto one = d.tensors->Upload(HostArray{DType::kU8, {bytes}, data}, rule);
    if (!one.ok()) {
      refused = one.status();
      break;
    }
    ids.push_back(one->id);
  }
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(refused.message(), HasSubstr("bytes of host overhead)"));
  EXPECT_THAT(refused.message(), HasSubstr("bytes charged"));
  return ids;
}

void DeleteAll(const Daemon& d, const std::vector<std::string>& ids) {
  for (size_t i = 0; i < ids.size(); i += 1000) {
    std::vector<std::string> part(ids.begin() + i, ids.begin() + std::min(ids.size(), i + 1000));
    ASSERT_TRUE(d.tensors->Delete(part).ok());
  }
}

// After every tensor is gone: nothing in use or charged, the cache decays,
// and RSS returns to within kIdleSlack of `baseline`.
void ExpectBackToBaseline(const Daemon& d, int64_t baseline, int64_t fds) {
  Totals after = Devices(d);
  EXPECT_EQ(after.in_use, 0);
  EXPECT_EQ(after.charged, 0);
  EXPECT_TRUE(Eventually([&] { return Devices(d).cached == 0; })) << Devices(d).cached;
  // The reclaimer trims malloc a tick after the releases stop.
  EXPECT_TRUE(Eventually([&] { return Rss(d) <= baseline + kIdleSlack; }))
      << "RSS " << Rss(d) << ", baseline " << baseline << "; largest mappings:\n"
      << testing::LargestMappings(d.process->pid(), 8);
  std::cout << "after delete and idle: RSS - baseline = " << Rss(d) - baseline << " bytes\n";
  EXPECT_LE(testing::OpenFds(d.process->pid()), fds + 4);
  auto status = d.client->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->num_tensors, 0);
}

TEST(MemoryBoundTest, OneByteTensorsOnTwoDevicesCostTheirPagesAndComeBack) {
  Daemon d = Start({"--cpu_devices=2", absl::StrCat("--cpu_device_memory=", 8 * kMiB),
                    "--device_cache_idle=500ms"});
  ASSERT_NE(d.tensors, nullptr);
  const int64_t baseline = Rss(d);
  const int64_t fds = testing::OpenFds(d.process->pid());
  std::vector<std::string> ids;
  for (int device = 0; device < 2; ++device) {
    auto part = FloodUntilRefused(d, 1, Placement::Device(device), 60000);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  const Totals full = Devices(d);
  const int64_t peak = Rss(d);
  std::cout << ids.size() << " one-byte tensors; in use " << full.in_use << ", charged "
            << full.charged << " of " << full.limit << "; RSS - baseline = " << peak - baseline
            << " bytes\n";
  // A page and a record each: 8 MiB holds 1365 per device, not 60,000.
  EXPECT_LT(ids.size(), 2u * 8 * kMiB / 4096);
  EXPECT_EQ(full.in_use, static_cast<int64_t>(ids.size()));
  EXPECT_LE(peak, baseline + full.limit + kLoadSlack);
  DeleteAll(d, ids);
  ExpectBackToBaseline(d, baseline, fds);
}

TEST(MemoryBoundTest, EightByteTensorsOverEightDevicesCostTheirPagesAndComeBack) {
  Daemon d = Start({"--cpu_devices=8", absl::StrCat("--cpu_device_memory=", 8 * kMiB),
                    "--device_cache_idle=500ms"});
  ASSERT_NE(d.tensors, nullptr);
  auto mesh = client::MeshClient(*d.client).Create({{"data", 8}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const int64_t baseline = Rss(d);
  const int64_t fds = testing::OpenFds(d.process->pid());
  auto ids = FloodUntilRefused(d, 8, Placement::Replicated(*mesh), 40000);
  const Totals full = Devices(d);
  const int64_t peak = Rss(d);
  std::cout << ids.size() << " eight-byte tensors x 8 devices; in use " << full.in_use
            << ", charged " << full.charged << " of " << full.limit
            << "; RSS - baseline = " << peak - baseline << " bytes\n";
  EXPECT_LT(ids.size(), 8u * kMiB / 4096);
  EXPECT_EQ(full.in_use, static_cast<int64_t>(ids.size()) * 8 * 8);
  EXPECT_LE(peak, baseline + full.limit + kLoadSlack);
  DeleteAll(d, ids);
  ExpectBackToBaseline(d, baseline, fds);
}

// Uploads and deletes 4 KiB - 24 MiB tensors on two devices, at most two
// alive per device (the churn of rss_churn_test).
void Churn(const Daemon& d, int rounds) {
  std::vector<uint8_t> bytes(24 * kMiB, 0x5a);
  uint64_t state = 0x9e3779b97f4a7c15ull;
  std::vector<std::vector<std::string>> live(2);
  for (int i = 0; i < rounds; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const int64_t size = 4096 + static_cast<int64_t>((state >> 33) % (24 * kMiB - 4096));
    const int device = i % 2;
    if (live[device].size() == 2) {
      ASSERT_TRUE(d.tensors->Delete({live[device].front()}).ok());
      live[device].erase(live[device].begin());
    }
    auto info =
        d.tensors->Upload(HostArray{DType::kU8, {size}, {bytes.data(), static_cast<size_t>(size)}},
                          Placement::Device(device));
    ASSERT_TRUE(info.ok()) << info.status();
    live[device].push_back(info->id);
  }
  for (auto& ids : live) ASSERT_TRUE(d.tensors->Delete(ids).ok());
}

double Released(const Daemon& d, const std::string& reason) {
  return testing::MetricValue(
      testing::HttpGet(testing::MetricsPort(d.process->ReadyValue("metrics")), "/metrics"),
      absl::StrCat("placementd_memory_released_bytes_total{reason=\"", reason, "\"}"));
}

TEST(MemoryBoundTest, AfterAChurnTheIdleCacheDecaysAndRssReturnsToTheStart) {
  Daemon d = Start({"--cpu_devices=2", absl::StrCat("--cpu_device_memory=", 64 * kMiB),
                    "--device_cache_idle=1s"});
  ASSERT_NE(d.tensors, nullptr);
  const int64_t baseline = Rss(d);
  const int64_t fds = testing::OpenFds(d.process->pid());
  Churn(d, 60);
  const Totals busy = Devices(d);
  std::cout << "after the churn: cached " << busy.cached
            << ", RSS - baseline = " << Rss(d) - baseline << " bytes\n";
  EXPECT_LE(Rss(d), baseline + busy.limit + kLoadSlack);
  ExpectBackToBaseline(d, baseline, fds);
  EXPECT_GT(Released(d, "idle"), 0);
}

TEST(MemoryBoundTest, UnderHostMemoryPressureTheCacheIsReleasedAtOnce) {
  // A threshold above any host's MemAvailable: always "under pressure".
  Daemon d = Start({"--cpu_devices=2", absl::StrCat("--cpu_device_memory=", 64 * kMiB),
                    "--device_cache_idle=1h", "--host_memory_min_available=1125899906842624"});
  ASSERT_NE(d.tensors, nullptr);
  Churn(d, 20);
  std::cout << "after the churn: cached " << Devices(d).cached << " bytes\n";
  // The reclaimer's next tick (a second here) finds the host under pressure.
  EXPECT_TRUE(Eventually([&] { return Released(d, "pressure") > 0 && Devices(d).cached == 0; }));
  EXPECT_THAT(d.process->Stderr(), HasSubstr("host memory is low (MemAvailable"));
  ASSERT_TRUE(d.client->GetStatus().ok());
}

}  // namespace
}  // namespace placement
