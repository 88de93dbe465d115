// Prefetch batches as zero-copy views (PrefetchOptions::views) against a
// real placementd on 127.0.0.1: every batch arrives with a view of each
// tensor, byte-equal to what the source yielded, on one device and sharded
// over eight; a view stays readable after its batch was released and after
// the stream ended; the iterator never holds views of more batches than it
// staged; and exports and device memory return to baseline after every
// ending (the end of data, the iterator destroyed mid-stream).
//
// With PLACEMENT_TEST_BACKEND=cuda (scripts/gpu_check.sh) the shards are
// device memory: every shard carries a CUDA IPC handle and no host bytes
// (this binary does not link CUDA; view_gpu_test opens such handles), and a
// batch's bytes are checked by downloading its tensor while the batch holds it.
#include <cstring>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "placement/client/prefetch.h"
#include "placement/client/tensors.h"
#include "placement/client/views.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/device_memory.h"

namespace placement::client {
namespace {

constexpr int64_t kRows = 64;
constexpr int64_t kRowFloats = 2048;  // 512 KiB of images: a block of its own

// Batch k: image value (k, i) = k * 1000 + i % 997, labels k * 100 + row.
std::vector<float> Images(int k) {
  std::vector<float> images(kRows * kRowFloats);
  for (size_t i = 0; i < images.size(); ++i) images[i] = static_cast<float>(k * 1000 + i % 997);
  return images;
}
std::vector<int32_t> Labels(int k) {
  std::vector<int32_t> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = k * 100 + r;
  return labels;
}

BatchSource Source(int batches) {
  auto next = std::make_shared<int>(0);
  return [next, batches]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (*next >= batches) return std::optional<HostBatch>();
    const int k = (*next)++;
    HostBatch batch;
    batch.Add<float>("images", Images(k), {kRows, kRowFloats});
    batch.Add<int32_t>("labels", Labels(k), {kRows});
    return std::optional<HostBatch>(std::move(batch));
  };
}

class PrefetchViewTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::DaemonProcess::Start({.extra_flags = {"--cpu_devices=8"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    ClientOptions options;
    options.session_policy = SessionPolicy::kNone;
    auto c = Client::Connect(daemon_->address(), options);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    baseline_ = MemoryInUse();
  }

  void TearDown() override {
    // Nothing a stream staged or exported outlives it and its views.
    EXPECT_TRUE(WaitFor([&] { return OpenExports() == 0 && MemoryInUse() == baseline_; }))
        << OpenExports() << " exports open, " << MemoryInUse() << " bytes in use (baseline "
        << baseline_ << ")";
  }

  int64_t MemoryInUse() { return testing::TotalMemoryInUse(*client_); }
  int64_t OpenExports() {
    auto list = ListExports(*client_);
    EXPECT_TRUE(list.ok()) << list.status();
    return list.ok() ? static_cast<int64_t>(list->exports.size()) : -1;
  }
  template <typename Fn>
  static bool WaitFor(Fn done) {
    const absl::Time deadline = absl::Now() + absl::Seconds(15);
    while (!done()) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }

  // True on a CUDA daemon: views carry IPC handles, not host bytes.
  static bool DeviceViews() { return testing::TestBackend() == "cuda"; }

  // The batch's views hold batch k's bytes (assembled from their shards); on
  // a CUDA daemon, every shard is an IPC handle and the tensor downloads as
  // batch k.
  void ExpectViews(const DeviceBatch& batch, int k) {
    ASSERT_EQ(batch.views.size(), batch.tensors.size());
    for (size_t i = 0; i < batch.tensors.size(); ++i) {
      ASSERT_NE(batch.views[i], nullptr);
      EXPECT_EQ(batch.views[i]->tensor().id, batch.tensors[i].tensor.id);
      if (!DeviceViews()) continue;
      for (const TensorView::Shard& shard : batch.views[i]->shards()) {
        EXPECT_FALSE(shard.cuda_ipc_handle.empty()) << "shard " << shard.index;
        EXPECT_TRUE(shard.bytes.empty()) << "shard " << shard.index;
      }
    }
    const std::vector<float> images = Images(k);
    std::vector<float> got_images(images.size());
    const std::vector<int32_t> labels = Labels(k);
    std::vector<int32_t> got_labels(labels.size());
    if (DeviceViews()) {
      TensorClient tensors(*client_);
      auto read = tensors.Download(batch.tensors[0].tensor.id, AsWritableBytes(got_images));
      ASSERT_TRUE(read.ok()) << read.status();
      read = tensors.Download(batch.tensors[1].tensor.id, AsWritableBytes(got_labels));
      ASSERT_TRUE(read.ok()) << read.status();
    } else {
      auto copied = batch.views[0]->CopyTo(std::as_writable_bytes(std::span(got_images)));
      ASSERT_TRUE(copied.ok()) << copied;
      copied = batch.views[1]->CopyTo(std::as_writable_bytes(std::span(got_labels)));
      ASSERT_TRUE(copied.ok()) << copied;
    }
    EXPECT_EQ(got_images, images) << "batch " << k;
    EXPECT_EQ(got_labels, labels) << "batch " << k;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  int64_t baseline_ = 0;
};

TEST_F(PrefetchViewTest, EveryBatchComesWithViewsOfItsBytesOnOneDevice) {
  PrefetchOptions options;
  options.views = true;
  auto it = PrefetchToDevice(*client_, Source(12), {}, /*buffer_size=*/2, options);
  ASSERT_TRUE(it.ok()) << it.status();
  std::shared_ptr<const TensorView> kept;  // batch 0's images, kept to the end
  for (int k = 0;; ++k) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) {
      EXPECT_EQ(k, 12);
      break;
    }
    ASSERT_EQ((*batch)->sequence, k);
    ExpectViews(**batch, k);
    // One device: the image shard is the whole array, mapped in place.
    ASSERT_EQ((*batch)->views[0]->shards().size(), 1u);
    EXPECT_FALSE((*batch)->views[0]->shards()[0].copied);
    if (!DeviceViews()) {
      ASSERT_EQ((*batch)->views[0]->bytes(0).size(), kRows * kRowFloats * sizeof(float));
    }
    if (k == 0) kept = (*batch)->views[0];
  }
  ASSERT_TRUE((*it)->stats().daemon.has_value());
  EXPECT_EQ((*it)->stats().daemon->batches_staged, 12);
  // Batch 0 was released eleven batches ago and the stream has ended: its
  // view still reads batch 0's bytes (on a CUDA daemon, its export is open).
  EXPECT_EQ(OpenExports(), 1);
  if (DeviceViews()) {
    EXPECT_FALSE(kept->shards()[0].cuda_ipc_handle.empty());
    kept.reset();
    return;
  }
  const std::vector<float> images = Images(0);
  std::vector<float> got(images.size());
  std::memcpy(got.data(), kept->bytes(0).data(), kept->bytes(0).size());
  EXPECT_EQ(got, images);
  kept.reset();
}

TEST_F(PrefetchViewTest, ShardedBatchesAssembleFromTheirShardViews) {
  auto mesh = MeshClient(*client_).CreateDataParallel(8, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  PrefetchOptions options;
  options.views = true;
  auto it =
      PrefetchToDevice(*client_, Source(6), Rule::ShardBatchDim(*mesh), /*buffer_size=*/3, options);
  ASSERT_TRUE(it.ok()) << it.status();
  int k = 0;
  while (true) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    ExpectViews(**batch, k);
    EXPECT_EQ((*batch)->views[0]->shards().size(), 8u);  // one per device, rows 8k .. 8k+7
    ++k;
  }
  EXPECT_EQ(k, 6);
}

TEST_F(PrefetchViewTest, DestroyingTheIteratorMidStreamEndsEveryExport) {
  PrefetchOptions options;
  options.views = true;
  {
    auto it = PrefetchToDevice(*client_, Source(50), {}, /*buffer_size=*/4, options);
    ASSERT_TRUE(it.ok()) << it.status();
    for (int k = 0; k < 3; ++k) {
      auto batch = (*it)->Next();
      ASSERT_TRUE(batch.ok()) << batch.status();
      ASSERT_TRUE(batch->has_value());
      ExpectViews(**batch, k);
    }
    // The viewer has opened views of the staged batches ahead of the
    // consumer, at most the buffer's worth beyond the one in use.
    EXPECT_TRUE(WaitFor([&] { return OpenExports() >= 2; }));
    EXPECT_LE(OpenExports(), 2 * 4);  // two tensors x buffer_size batches
  }  // destroyed: cancels the stream, joins both threads, closes queued views
  // TearDown: exports and memory back to baseline.
}

// A view the daemon refuses ends the iteration with the refusal, not with
// the cancellation the viewer then sends; what was staged and exported goes.
TEST_F(PrefetchViewTest, ARefusedViewEndsTheIterationWithItsCause) {
  auto daemon =
      testing::DaemonProcess::Start({.extra_flags = {"--cpu_devices=8", "--max_exports=3"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ClientOptions client_options;
  client_options.session_policy = SessionPolicy::kNone;
  auto c = Client::Connect((*daemon)->address(), client_options);
  ASSERT_TRUE(c.ok()) << c.status();
  client_ = std::move(*c);
  daemon_ = std::move(*daemon);  // the fixture's daemon goes
  baseline_ = MemoryInUse();
  PrefetchOptions options;
  options.views = true;
  {
    auto it = PrefetchToDevice(*client_, Source(10), {}, /*buffer_size=*/2, options);
    ASSERT_TRUE(it.ok()) << it.status();
    absl::Status ended;
    std::vector<DeviceBatch> held;  // keeps the views open: the bound is reached
    for (int k = 0; k < 10 && ended.ok(); ++k) {
      auto batch = (*it)->Next();
      if (!batch.ok()) {
        ended = batch.status();
      } else {
        ASSERT_TRUE(batch->has_value()) << "batch " << k << " missing";
        held.push_back(**std::move(batch));
      }
    }
    EXPECT_EQ(ended.code(), absl::StatusCode::kResourceExhausted) << ended;
    EXPECT_THAT(ended.message(), ::testing::HasSubstr("of --max_exports=3 are open"));
    EXPECT_LE(held.size(), 2u);
    auto again = (*it)->Next();
    EXPECT_EQ(again.status(), ended);
  }
  // TearDown: exports and memory back to baseline.
}

TEST_F(PrefetchViewTest, WithoutViewsBatchesCarryNone) {
  auto it = PrefetchToDevice(*client_, Source(2), {}, /*buffer_size=*/2);
  ASSERT_TRUE(it.ok()) << it.status();
  auto batch = (*it)->Next();
  ASSERT_TRUE(batch.ok()) << batch.status();
  ASSERT_TRUE(batch->has_value());
  EXPECT_TRUE((*batch)->views.empty());
  EXPECT_EQ(OpenExports(), 0);
}

}  // namespace
}  // namespace placement::client
