// Prefetch through the region ring (PrefetchOptions::path) against a real
// placementd on 127.0.0.1: the same ordering, completeness and backpressure
// guarantees as the stream path (prefetch_test.cc), the ring reusing a few
// regions instead of growing, large batches taking it by themselves under
// kAuto, and device memory back to zero after every ending.
#include <atomic>
#include <cstring>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/prefetch.h"
#include "placement/client/regions.h"
#include "placement/client/tensors.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/device_memory.h"

namespace placement::client {
namespace {

constexpr int64_t kRows = 8;

// Batch k of `row_floats` floats per row: every image value k, labels
// k * 100 + row.
HostBatch MakeBatch(int k, int64_t row_floats) {
  std::vector<float> images(kRows * row_floats, static_cast<float>(k));
  std::vector<int32_t> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = k * 100 + r;
  HostBatch batch;
  batch.Add<float>("images", images, {kRows, row_floats});
  batch.Add<int32_t>("labels", labels, {kRows});
  return batch;
}

class PrefetchRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::DaemonProcess::Start(
        {.extra_flags = {"--cpu_devices=8", "--cpu_device_memory=67108864"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto c = daemon_->Connect();
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    tensors_ = std::make_unique<TensorClient>(*client_);
  }

  int64_t MemoryInUse() { return testing::TotalMemoryInUse(*client_); }

  int64_t Regions() {
    auto list = RegionClient(*client_).List();
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? static_cast<int64_t>(list->size()) : -1;
  }

  void ExpectBatch(const DeviceBatch& batch, int k, int64_t row_floats) {
    std::vector<int32_t> labels(kRows);
    ASSERT_TRUE(tensors_->Download(batch.tensor("labels").id, AsWritableBytes(labels)).ok());
    for (int r = 0; r < kRows; ++r) ASSERT_EQ(labels[r], k * 100 + r) << "batch " << k;
    std::vector<float> images(kRows * row_floats);
    ASSERT_TRUE(tensors_->Download(batch.tensor("images").id, AsWritableBytes(images)).ok());
    EXPECT_EQ(images.front(), static_cast<float>(k));
    EXPECT_EQ(images.back(), static_cast<float>(k));
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<TensorClient> tensors_;
};

TEST_F(PrefetchRegionTest, IteratorThroughTheRingYieldsEveryBatchOnceInOrder) {
  PrefetchOptions options;
  options.path = TransferPath::kRegion;
  auto next = std::make_shared<int>(0);
  BatchSource source = [next]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (*next >= 20) return std::optional<HostBatch>();
    return std::optional<HostBatch>(MakeBatch((*next)++, 16));
  };
  const int64_t batch_bytes = kRows * 16 * 4 + kRows * 4;
  auto it = PrefetchToDevice(*client_, source, {}, /*buffer_size=*/2, options);
  ASSERT_TRUE(it.ok()) << it.status();
  int k = 0;
  while (true) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    EXPECT_EQ((*batch)->sequence, k);
    ExpectBatch(**batch, k, 16);
    EXPECT_LE(MemoryInUse(), 2 * batch_bytes);
    // A ring, not one region per batch: at most the batches in flight.
    EXPECT_LE(Regions(), 3);
    ++k;
  }
  EXPECT_EQ(k, 20);
  const auto& stats = (*it)->stats();
  ASSERT_TRUE(stats.daemon.has_value());
  EXPECT_EQ(stats.daemon->batches_staged, 20);
  EXPECT_EQ(stats.daemon->bytes_staged, 20 * batch_bytes);
  EXPECT_LE(stats.daemon->max_batches_held, 2);
  EXPECT_EQ(MemoryInUse(), 0);
  EXPECT_GE(Regions(), 1);  // the ring stays with the Client for reuse
}

TEST_F(PrefetchRegionTest, StalledConsumerHoldsAtMostBufferSizeBatches) {
  PrefetchOptions options;
  options.buffer_size = 2;
  options.path = TransferPath::kRegion;
  const int64_t batch_bytes = kRows * 16 * 4 + kRows * 4;
  auto stream = PrefetchStream::Open(*client_, options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  PrefetchStream& s = **stream;
  std::atomic<int> sent{0};
  absl::Notification third_send_started;
  std::thread producer([&] {
    for (int k = 0; k < 6; ++k) {
      if (k == 2) third_send_started.Notify();
      HostBatch batch = MakeBatch(k, 16);
      auto seq = s.SendBatch(batch.Views());
      if (!seq.ok()) return;
      sent.fetch_add(1);
    }
  });
  third_send_started.WaitForNotification();
  for (int k = 0; k < 2; ++k) {
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ExpectBatch(**batch, k, 16);
  }
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(MemoryInUse(), 2 * batch_bytes);
    ASSERT_TRUE(client_->GetStatus().ok());
  }
  EXPECT_EQ(sent.load(), 2);
  for (int k = 2; k < 6; ++k) {
    ASSERT_TRUE(s.Release(k - 2).ok());
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    EXPECT_EQ((*batch)->sequence, k);
    ExpectBatch(**batch, k, 16);
    EXPECT_LE(MemoryInUse(), 2 * batch_bytes);
  }
  producer.join();
  EXPECT_EQ(sent.load(), 6);
  ASSERT_TRUE(s.Release(4).ok());
  ASSERT_TRUE(s.Release(5).ok());
  ASSERT_TRUE(s.CloseSend().ok());
  auto end = s.Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  ASSERT_TRUE(s.stats().has_value());
  EXPECT_EQ(s.stats()->max_batches_held, 2);
  EXPECT_GT(s.stats()->producer_blocked, absl::ZeroDuration());
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchRegionTest, LargeBatchesTakeTheRingByThemselves) {
  // 8 x 16384 floats = 512 KiB per batch: over the automatic threshold.
  const int64_t row_floats = 16384;
  int sent = 0;
  BatchSource source = [&sent, row_floats]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (sent >= 6) return std::optional<HostBatch>();
    return std::optional<HostBatch>(MakeBatch(sent++, row_floats));
  };
  auto it = PrefetchToDevice(*client_, source);
  ASSERT_TRUE(it.ok()) << it.status();
  for (int k = 0; k < 6; ++k) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ExpectBatch(**batch, k, row_floats);
  }
  auto end = (*it)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  auto list = RegionClient(*client_).List();
  ASSERT_TRUE(list.ok());
  EXPECT_FALSE(list->empty());
  for (const RegionInfo& region : *list) EXPECT_EQ(region.name, "placement-staging");
  // Forced stream: no region involved, same batches.
  PrefetchOptions stream_only;
  stream_only.path = TransferPath::kStream;
  auto streamed = PrefetchStream::Open(*client_, stream_only);
  ASSERT_TRUE(streamed.ok());
  HostBatch batch = MakeBatch(7, row_floats);
  ASSERT_TRUE((*streamed)->SendBatch(batch.Views()).ok());
  auto read = (*streamed)->Read();
  ASSERT_TRUE(read.ok() && read->has_value());
  ExpectBatch(**read, 7, row_floats);
  (*streamed)->Cancel();
}

}  // namespace
}  // namespace placement::client
