// Shared fixture of the client-library integration tests: one real
// placementd (CPU backend, 8 virtual devices) per test suite, a connected
// Client per test, and after every test: all tensors and meshes deleted and
// device memory back to the baseline measured before the test.
#ifndef PLACEMENT_TESTS_INTEGRATION_CLIENT_DAEMON_FIXTURE_H_
#define PLACEMENT_TESTS_INTEGRATION_CLIENT_DAEMON_FIXTURE_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/random_bytes.h"

namespace placement::client {

class ClientDaemonTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::DaemonOptions options;
    options.extra_flags = {"--backend=cpu", "--cpu_devices=8"};
    auto daemon = testing::DaemonProcess::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = daemon->release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }

  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    auto client = daemon_->Connect();
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    tensors_ = std::make_unique<TensorClient>(*client_);
    meshes_ = std::make_unique<MeshClient>(*client_);
    baseline_ = MemoryInUse();
  }

  void TearDown() override {
    if (client_ == nullptr) return;
    auto list = tensors_->List();
    ASSERT_TRUE(list.ok()) << list.status();
    std::vector<std::string> ids;
    for (const auto& t : *list) ids.push_back(t.id);
    if (!ids.empty()) ASSERT_TRUE(tensors_->Delete(ids).ok());
    auto meshes = meshes_->List();
    ASSERT_TRUE(meshes.ok());
    for (const auto& m : *meshes) ASSERT_TRUE(meshes_->Delete(m.id, TensorsOnMesh::kDelete).ok());
    ExpectMemoryAtBaseline();
  }

  // Per-device memory_in_use_bytes, in device order.
  std::vector<int64_t> MemoryInUse() const {
    auto devices = client_->ListDevices();
    EXPECT_TRUE(devices.ok()) << devices.status();
    std::vector<int64_t> out;
    if (devices.ok()) {
      for (const auto& d : *devices) out.push_back(d.memory_in_use_bytes);
    }
    return out;
  }

  // A cancelled stream is torn down by the daemon when it notices the
  // cancellation, so allow it a bounded while.
  void ExpectMemoryAtBaseline() const {
    absl::Time deadline = absl::Now() + absl::Seconds(10);
    std::vector<int64_t> now = MemoryInUse();
    while (now != baseline_ && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(20));
      now = MemoryInUse();
    }
    EXPECT_EQ(now, baseline_);
  }

  absl::StatusOr<Mesh> DataMesh(int64_t n, const std::string& axis = "data") const {
    return meshes_->CreateDataParallel(n, axis);
  }

  static std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed, bool boolean = false) {
    return testing::RandomBytes(n, seed, boolean);
  }

  // The bytes of `box` (per-dimension [begin, end)) of a row-major array.
  static std::vector<uint8_t> ExtractBox(const std::vector<uint8_t>& data,
                                         const std::vector<int64_t>& shape, int64_t element,
                                         const ShardInfo& shard) {
    std::vector<uint8_t> out;
    size_t rank = shape.size();
    if (rank == 0) return data;
    std::vector<int64_t> begin(rank), end(rank), index(rank);
    for (size_t d = 0; d < rank; ++d) {
      begin[d] = shard.ranges[d].begin;
      end[d] = shard.ranges[d].end;
      if (begin[d] >= end[d]) return out;
    }
    index = begin;
    while (true) {
      int64_t offset = 0;
      for (size_t d = 0; d < rank; ++d) offset = offset * shape[d] + index[d];
      out.insert(out.end(), data.begin() + offset * element, data.begin() + (offset + 1) * element);
      size_t d = rank;
      while (d > 0) {
        --d;
        if (++index[d] < end[d]) break;
        index[d] = begin[d];
        if (d == 0) return out;
      }
    }
  }

  static inline testing::DaemonProcess* daemon_ = nullptr;
  std::unique_ptr<Client> client_;
  std::unique_ptr<TensorClient> tensors_;
  std::unique_ptr<MeshClient> meshes_;
  std::vector<int64_t> baseline_;
};

}  // namespace placement::client

#endif  // PLACEMENT_TESTS_INTEGRATION_CLIENT_DAEMON_FIXTURE_H_
