// Shared fixture of the shard view tests (views_test.cc,
// view_lifetime_test.cc): one real placementd per suite (CPU backend, 8
// virtual devices, two tenants and an admin by bearer token, metrics on),
// clients per tenant, and helpers to upload known bytes and read the
// daemon's figures (exports open, memory in use, its descriptors).
#ifndef PLACEMENT_TESTS_INTEGRATION_VIEW_FIXTURE_H_
#define PLACEMENT_TESTS_INTEGRATION_VIEW_FIXTURE_H_

#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "placement/client/session.h"
#include "tests/testing/auth_tokens.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"
#include "tests/testing/random_bytes.h"

namespace placement::client {

// A view's bytes, to compare.
inline std::vector<uint8_t> Bytes(std::span<const std::byte> span) {
  const auto* data = reinterpret_cast<const uint8_t*>(span.data());
  return std::vector<uint8_t>(data, data + span.size());
}

class ViewTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    const std::string creds = dir_->path() + "/credentials";
    std::ofstream(creds) << "token sha256:" << testing::Sha256Hex("alpha-token")
                         << " team-a user alice\n"
                         << "token sha256:" << testing::Sha256Hex("bravo-token")
                         << " team-b user bob\n"
                         << "token sha256:" << testing::Sha256Hex("root-token")
                         << " ops admin root\n";
    testing::DaemonOptions options;
    options.extra_flags = {"--backend=cpu", "--cpu_devices=8", "--auth_file=" + creds,
                           "--metrics_listen=127.0.0.1:0", "--session_sweep_interval=100ms"};
    auto daemon = testing::DaemonProcess::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    alice_ = Connect("alpha-token");
    bob_ = Connect("bravo-token");
    root_ = Connect("root-token", SessionPolicy::kNone);
    ASSERT_TRUE(alice_ && bob_ && root_);
    baseline_ = MemoryInUse();
  }

  void TearDown() override {
    alice_.reset();  // closes its session: its tensors and exports go
    bob_.reset();
    if (root_ == nullptr) return;
    // Durable leftovers of the test, every tenant's (the admin sees all).
    auto list = TensorClient(*root_).List();
    ASSERT_TRUE(list.ok()) << list.status();
    std::vector<std::string> ids;
    for (const auto& t : *list) ids.push_back(t.id);
    if (!ids.empty()) ASSERT_TRUE(TensorClient(*root_).Delete(ids).ok());
    EXPECT_TRUE(WaitFor([&] { return OpenExports() == 0 && MemoryInUse() == baseline_; }))
        << OpenExports() << " exports open";
  }

  static std::unique_ptr<Client> Connect(const std::string& token,
                                         SessionPolicy policy = SessionPolicy::kOpen,
                                         const std::string& session_id = "") {
    ClientOptions options;
    options.token = token;
    options.session_policy = policy;
    options.session_id = session_id;
    auto client = Client::Connect(daemon_->address(), options);
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? *std::move(client) : nullptr;
  }

  // Memory in use per device, as the admin sees it.
  std::vector<int64_t> MemoryInUse() const {
    std::vector<int64_t> out;
    auto devices = root_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.status();
    if (devices.ok()) {
      for (const auto& d : *devices) out.push_back(d.memory_in_use_bytes);
    }
    return out;
  }
  int64_t TotalInUse() const {
    int64_t total = 0;
    for (int64_t bytes : MemoryInUse()) total += bytes;
    return total;
  }
  int64_t OpenExports() const {
    auto list = ListExports(*root_);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? static_cast<int64_t>(list->exports.size()) : -1;
  }
  std::string Metrics() const {
    return testing::HttpGet(testing::MetricsPort(daemon_->ReadyValue("metrics")), "/metrics");
  }
  double Metric(const std::string& series) const { return testing::MetricValue(Metrics(), series); }

  // Waits (bounded: the daemon notices exits and ended sessions within its
  // sweep) for `done`.
  template <typename Fn>
  static bool WaitFor(Fn done, absl::Duration timeout = absl::Seconds(15)) {
    const absl::Time deadline = absl::Now() + timeout;
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }

  static std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, bool boolean = false) {
    return testing::RandomBytes(n, seed, boolean);
  }

  // Uploads `bytes` as dtype[shape] under `rule` for `client`.
  static TensorInfo Upload(const Client& client, DType dtype, std::vector<int64_t> shape,
                           const std::vector<uint8_t>& bytes, const Rule& rule = {}) {
    auto info = TensorClient(client).Upload(HostArray{dtype, std::move(shape), bytes}, rule);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : TensorInfo{};
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline testing::DaemonProcess* daemon_ = nullptr;
  std::unique_ptr<Client> alice_;
  std::unique_ptr<Client> bob_;
  std::unique_ptr<Client> root_;
  std::vector<int64_t> baseline_;
};

}  // namespace placement::client

#endif  // PLACEMENT_TESTS_INTEGRATION_VIEW_FIXTURE_H_
