// PrefetchService against a real placementd process over real gRPC: the
// iterator API (prefetch_to_device) and the raw stream, ordering and
// completeness, backpressure bounded by buffer_size (checked through the
// daemon's memory accounting), end of stream, cancellation, bad batches,
// buffer_size defaults, concurrent pipelines, sharded batches on a 2-D mesh,
// and shutdown. After every ending device memory is back to its baseline.
#include "placement/client/prefetch.h"

#include <signal.h>

#include <atomic>
#include <cstring>
#include <thread>

#include "absl/cleanup/cleanup.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/device_placement.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/prefetch_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/device_memory.h"
#include "tests/testing/process_probe.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using client::BatchSource;
using client::DeviceBatch;
using client::HostBatch;
using client::PrefetchOptions;
using client::PrefetchStream;
using client::PrefetchToDevice;
using client::Rule;
using testing::DaemonOptions;
using testing::DaemonProcess;
using ::testing::HasSubstr;

constexpr int64_t kRows = 8;
// images f32[8,4,4] (512 bytes) + labels i32[8] (32 bytes).
constexpr int64_t kBatchBytes = kRows * 16 * 4 + kRows * 4;

// Batch k: every image value and every label is k (labels k*100 + row).
HostBatch MakeBatch(int k) {
  std::vector<float> images(kRows * 16, static_cast<float>(k));
  std::vector<int32_t> labels(kRows);
  for (int r = 0; r < kRows; ++r) labels[r] = k * 100 + r;
  HostBatch batch;
  batch.Add<float>("images", images, {kRows, 4, 4});
  batch.Add<int32_t>("labels", labels, {kRows});
  return batch;
}

BatchSource CountingSource(int n, std::shared_ptr<std::atomic<int>> calls = nullptr) {
  auto next = std::make_shared<int>(0);
  return [next, n, calls]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (calls) calls->fetch_add(1);
    if (*next >= n) return std::optional<HostBatch>();
    return std::optional<HostBatch>(MakeBatch((*next)++));
  };
}

class PrefetchTest : public ::testing::Test {
 protected:
  // 64 MiB devices: room for a few batches on any platform (a CUDA block is
  // 2 MiB); the stream's own bounds are what these tests check.
  void SetUp() override { Start({"--cpu_devices=8", "--cpu_device_memory=67108864"}); }

  void Start(std::vector<std::string> flags) {
    auto daemon = DaemonProcess::Start({.extra_flags = std::move(flags)});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
    auto c = daemon_->Connect();
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    tensors_ = std::make_unique<client::TensorClient>(*client_);
  }

  int64_t MemoryInUse() { return testing::TotalMemoryInUse(*client_); }

  // The daemon frees a cancelled stream's batches after the client has
  // gone, with no message to wait for: poll, bounded.
  int64_t MemoryAfterSettling() {
    int64_t in_use = MemoryInUse();
    for (int i = 0; i < 200 && in_use != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      in_use = MemoryInUse();
    }
    return in_use;
  }

  std::vector<int32_t> Labels(const client::TensorInfo& info) {
    std::vector<int32_t> labels(kRows);
    auto header = tensors_->Download(info.id, client::AsWritableBytes(labels));
    EXPECT_TRUE(header.ok()) << header.status();
    return labels;
  }

  void ExpectBatch(const DeviceBatch& batch, int k) {
    ASSERT_NE(batch.Find("images"), nullptr);
    ASSERT_NE(batch.Find("labels"), nullptr);
    EXPECT_THAT(batch.tensor("images").shape, ::testing::ElementsAre(kRows, 4, 4));
    std::vector<int32_t> labels = Labels(batch.tensor("labels"));
    for (int r = 0; r < kRows; ++r) ASSERT_EQ(labels[r], k * 100 + r) << "batch " << k;
    std::vector<float> images(kRows * 16);
    ASSERT_TRUE(
        tensors_->Download(batch.tensor("images").id, client::AsWritableBytes(images)).ok());
    EXPECT_EQ(images.front(), static_cast<float>(k));
    EXPECT_EQ(images.back(), static_cast<float>(k));
  }

  // A raw gRPC stream, for what the client library never sends.
  struct RawStream {
    grpc::ClientContext context;
    std::unique_ptr<pb::PrefetchService::Stub> stub;
    std::unique_ptr<grpc::ClientReaderWriter<pb::PrefetchRequest, pb::PrefetchResponse>> stream;
  };
  // A stream of `buffer_size` with batches 0 .. buffer_size-1 sent (null
  // after a failed assertion).
  std::unique_ptr<PrefetchStream> OpenFull(int buffer_size) {
    PrefetchOptions options;
    options.buffer_size = buffer_size;
    auto stream = PrefetchStream::Open(*client_, options);
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return nullptr;
    for (int k = 0; k < buffer_size; ++k) {
      HostBatch batch = MakeBatch(k);
      absl::StatusOr<int64_t> sent = (*stream)->SendBatch(batch.Views());
      EXPECT_TRUE(sent.ok()) << sent.status();
      if (!sent.ok()) return nullptr;
    }
    return *std::move(stream);
  }

  std::unique_ptr<RawStream> OpenRaw(int buffer_size) {
    auto raw = std::make_unique<RawStream>();
    raw->stub = pb::PrefetchService::NewStub(
        grpc::CreateChannel(client_->target(), grpc::InsecureChannelCredentials()));
    raw->stream = raw->stub->Prefetch(&raw->context);
    pb::PrefetchRequest open;
    open.mutable_open()->set_buffer_size(buffer_size);
    EXPECT_TRUE(raw->stream->Write(open));
    return raw;
  }
  static bool WriteBatch(RawStream& raw, const HostBatch& batch, size_t truncate_last = 0) {
    pb::PrefetchRequest header;
    for (const auto& a : batch.arrays) {
      pb::ArrayHeader* h = header.mutable_batch()->add_arrays();
      h->set_key(a.key);
      h->set_dtype(static_cast<pb::DType>(static_cast<int>(a.dtype)));
      for (int64_t d : a.shape) h->add_shape(d);
    }
    if (!raw.stream->Write(header)) return false;
    for (size_t i = 0; i < batch.arrays.size(); ++i) {
      pb::PrefetchRequest chunk;
      chunk.mutable_chunk()->set_array_index(static_cast<int32_t>(i));
      const auto& bytes = batch.arrays[i].bytes;
      size_t n = bytes.size() - (i + 1 == batch.arrays.size() ? truncate_last : 0);
      chunk.mutable_chunk()->set_data(reinterpret_cast<const char*>(bytes.data()), n);
      if (!raw.stream->Write(chunk)) return false;
    }
    return true;
  }
  // Reads to the end; returns the final status.
  static grpc::Status Drain(RawStream& raw, int* readies = nullptr) {
    pb::PrefetchResponse response;
    while (raw.stream->Read(&response)) {
      if (readies != nullptr && response.has_ready()) ++*readies;
    }
    return raw.stream->Finish();
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<client::Client> client_;
  std::unique_ptr<client::TensorClient> tensors_;
};

TEST_F(PrefetchTest, IteratorYieldsEveryBatchOnceInOrder) {
  auto it = PrefetchToDevice(*client_, CountingSource(20));
  ASSERT_TRUE(it.ok()) << it.status();
  int k = 0;
  while (true) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok()) << batch.status();
    if (!batch->has_value()) break;
    EXPECT_EQ((*batch)->sequence, k);
    ExpectBatch(**batch, k);
    // The batch in use plus at most one staged ahead.
    EXPECT_LE(MemoryInUse(), 2 * kBatchBytes);
    ++k;
  }
  EXPECT_EQ(k, 20);
  auto again = (*it)->Next();
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  const auto& stats = (*it)->stats();
  EXPECT_EQ(stats.batches, 20);
  EXPECT_EQ(stats.bytes, 20 * kBatchBytes);
  ASSERT_TRUE(stats.daemon.has_value());
  EXPECT_EQ(stats.daemon->batches_staged, 20);
  EXPECT_EQ(stats.daemon->bytes_staged, 20 * kBatchBytes);
  EXPECT_LE(stats.daemon->max_batches_held, 2);
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, DevicePlacementFacadeUsesTheDefaultDevice) {
  auto placement = client::DevicePlacement::Create(*client_, /*default_device=*/5);
  ASSERT_TRUE(placement.ok()) << placement.status();
  auto it = placement->prefetch_to_device(CountingSource(3), std::nullopt, /*buffer_size=*/3);
  ASSERT_TRUE(it.ok()) << it.status();
  for (int k = 0; k < 3; ++k) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    EXPECT_EQ((*batch)->tensor("images").shards[0].device_id, 5);
    ExpectBatch(**batch, k);
  }
  auto end = (*it)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, StalledConsumerHoldsAtMostBufferSizeBatches) {
  PrefetchOptions options;
  options.buffer_size = 2;
  auto stream = PrefetchStream::Open(*client_, options);
  ASSERT_TRUE(stream.ok()) << stream.status();
  PrefetchStream& s = **stream;
  std::atomic<int> sent{0};
  absl::Notification third_send_started;
  std::thread producer([&] {
    for (int k = 0; k < 6; ++k) {
      if (k == 2) third_send_started.Notify();
      HostBatch batch = MakeBatch(k);
      auto seq = s.SendBatch(batch.Views());
      if (!seq.ok()) return;
      sent.fetch_add(1);
    }
  });
  third_send_started.WaitForNotification();
  // The consumer reads two batches and stalls without releasing them.
  for (int k = 0; k < 2; ++k) {
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ExpectBatch(**batch, k);
  }
  // Whatever the producer does now, it cannot make the daemon hold more.
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(MemoryInUse(), 2 * kBatchBytes);
    auto status = client_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
  }
  EXPECT_EQ(sent.load(), 2);
  // Releasing one batch at a time lets one more in each time.
  for (int k = 2; k < 6; ++k) {
    ASSERT_TRUE(s.Release(k - 2).ok());
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    EXPECT_EQ((*batch)->sequence, k);
    EXPECT_LE(MemoryInUse(), 2 * kBatchBytes);
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

TEST_F(PrefetchTest, DaemonRefusesABatchBeyondTheBuffer) {
  auto raw = OpenRaw(/*buffer_size=*/0);  // 0 selects the default, 2
  ASSERT_TRUE(WriteBatch(*raw, MakeBatch(0)));
  ASSERT_TRUE(WriteBatch(*raw, MakeBatch(1)));
  WriteBatch(*raw, MakeBatch(2));  // may fail once the daemon has answered
  int readies = 0;
  grpc::Status status = Drain(*raw, &readies);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(status.error_message(), HasSubstr("batch 2 arrived while 2 batches are held"));
  EXPECT_THAT(status.error_message(), HasSubstr("buffer_size 2"));
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, NegativeBufferSizeIsInvalid) {
  auto raw = OpenRaw(-3);
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("open.buffer_size is -3"));

  PrefetchOptions options;
  options.buffer_size = -1;
  auto stream = PrefetchStream::Open(*client_, options);
  EXPECT_EQ(stream.status().code(), absl::StatusCode::kInvalidArgument);
  auto it = PrefetchToDevice(*client_, CountingSource(1), Rule(), -1);
  EXPECT_EQ(it.status().code(), absl::StatusCode::kInvalidArgument);
}

// Next() refused because the batch asked for earlier is not read yet
// (RequestNext() then Next(), or two consumers at once) reads nothing: the
// batch stays for the Read that asked for it (before, the refused Next
// read it and dropped it, and its slot was never freed).
TEST_F(PrefetchTest, ARefusedNextLosesNoBatch) {
  std::unique_ptr<PrefetchStream> stream = OpenFull(2);
  ASSERT_NE(stream, nullptr);
  PrefetchStream& s = *stream;
  // A lost batch would leave a read waiting for good: cancelled after 30 s
  // (Cancel may be called from any thread), the test fails instead.
  absl::Notification done;
  std::thread watchdog([&] {
    if (!done.WaitForNotificationWithTimeout(absl::Seconds(30))) s.Cancel();
  });
  absl::Cleanup stop_watchdog = [&] {
    done.Notify();
    watchdog.join();
  };
  ASSERT_TRUE(s.RequestNext().ok());
  auto refused = s.Next();
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
  auto first = s.Read();
  ASSERT_TRUE(first.ok() && first->has_value()) << first.status();
  EXPECT_EQ((*first)->sequence, 0);
  auto second = s.Next();
  ASSERT_TRUE(second.ok() && second->has_value()) << second.status();
  EXPECT_EQ((*second)->sequence, 1);
  s.Cancel();
}

TEST_F(PrefetchTest, EndOfStreamDeliversTheRestThenFreesUnreleased) {
  std::unique_ptr<PrefetchStream> stream = OpenFull(3);
  ASSERT_NE(stream, nullptr);
  PrefetchStream& s = *stream;
  ASSERT_TRUE(s.CloseSend().ok());
  for (int k = 0; k < 3; ++k) {
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    EXPECT_EQ((*batch)->sequence, k);
  }
  auto end = s.Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  ASSERT_TRUE(s.stats().has_value());
  EXPECT_EQ(s.stats()->batches_staged, 3);
  EXPECT_EQ(s.stats()->bytes_staged, 3 * kBatchBytes);
  // The stream finished OK, and its unreleased batches went with it.
  EXPECT_EQ(MemoryInUse(), 0);
  auto left = tensors_->List();
  ASSERT_TRUE(left.ok());
  EXPECT_TRUE(left->empty());
}

TEST_F(PrefetchTest, StreamNameOwnerAndPerBatchRule) {
  PrefetchOptions options;
  options.name = "train";
  options.owner = "job-7";
  options.rule = client::Placement::Device(2);
  options.chunk_bytes = 100;  // many small chunks
  auto stream = PrefetchStream::Open(*client_, options);
  ASSERT_TRUE(stream.ok());
  PrefetchStream& s = **stream;
  HostBatch first = MakeBatch(0), second = MakeBatch(1);
  ASSERT_TRUE(s.SendBatch(first.Views()).ok());
  ASSERT_TRUE(s.SendBatch(second.Views(), Rule(client::Placement::Device(6))).ok());
  for (int k = 0; k < 2; ++k) {
    auto batch = s.Read();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    const client::TensorInfo& labels = (*batch)->tensor("labels");
    EXPECT_EQ(labels.name, "train/" + std::to_string(k) + "/labels");
    EXPECT_EQ(labels.owner, "job-7");
    EXPECT_EQ(labels.shards[0].device_id, k == 0 ? 2 : 6);
    ExpectBatch(**batch, k);
    ASSERT_TRUE(s.Release(k).ok());
  }
  EXPECT_EQ(s.Release(0).code(), absl::StatusCode::kFailedPrecondition);  // twice
  EXPECT_EQ(s.Release(9).code(), absl::StatusCode::kInvalidArgument);     // never sent
  ASSERT_TRUE(s.CloseSend().ok());
  auto end = s.Read();
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, CancelMidStreamFreesEverything) {
  const int64_t baseline = MemoryInUse();
  {
    // An endless source: only cancellation ends this pipeline.
    auto next = std::make_shared<int>(0);
    auto it = PrefetchToDevice(
        *client_,
        [next]() -> absl::StatusOr<std::optional<HostBatch>> {
          return std::optional<HostBatch>(MakeBatch((*next)++));
        },
        Rule(), 3);
    ASSERT_TRUE(it.ok());
    for (int k = 0; k < 4; ++k) {
      auto batch = (*it)->Next();
      ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
      ExpectBatch(**batch, k);
    }
    EXPECT_GT(MemoryInUse(), baseline);
  }  // the iterator is dropped mid-stream
  EXPECT_EQ(MemoryAfterSettling(), baseline);

  PrefetchOptions options;
  auto stream = PrefetchStream::Open(*client_, options);
  ASSERT_TRUE(stream.ok());
  HostBatch batch = MakeBatch(0);
  ASSERT_TRUE((*stream)->SendBatch(batch.Views()).ok());
  auto ready = (*stream)->Read();
  ASSERT_TRUE(ready.ok() && ready->has_value());
  (*stream)->Cancel();
  auto after = (*stream)->Read();
  EXPECT_EQ(after.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(MemoryAfterSettling(), baseline);
}

// Streams the client cancels are counted `cancelled` in
// placementd_prefetch_streams_total, also when the cancel cuts a batch in
// half (the read it failed can reach the daemon before the cancel does,
// looking like an input that ended mid-batch: before, some were counted
// `error`), and the gauge of open streams comes back to 0.
TEST_F(PrefetchTest, ClientCancelsAreCountedCancelledNotErrors) {
  Start({"--cpu_devices=8", "--cpu_device_memory=67108864", "--metrics_listen=127.0.0.1:0"});
  const int port = testing::MetricsPort(daemon_->ReadyValue("metrics"));
  auto metric = [&](const std::string& series) {
    return testing::MetricValue(testing::HttpGet(port, "/metrics"), series);
  };
  constexpr int kStreams = 40;
  for (int i = 0; i < kStreams; ++i) {
    auto raw = OpenRaw(2);
    pb::PrefetchRequest header;  // a batch's header, none of its bytes
    pb::ArrayHeader* array = header.mutable_batch()->add_arrays();
    array->set_key("x");
    array->set_dtype(pb::DTYPE_F32);
    array->add_shape(1024);
    ASSERT_TRUE(raw->stream->Write(header));
    if (i % 2 == 1) {  // half of them also send part of its bytes
      pb::PrefetchRequest chunk;
      chunk.mutable_chunk()->set_data(std::string(100, 'x'));
      ASSERT_TRUE(raw->stream->Write(chunk));
    }
    raw->context.TryCancel();
    EXPECT_EQ(raw->stream->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The daemon counts each stream when it is done with it: poll, bounded.
  double cancelled = 0;
  for (int i = 0; i < 200; ++i) {
    cancelled = metric("placementd_prefetch_streams_total{result=\"cancelled\"}");
    if (cancelled + metric("placementd_prefetch_streams_total{result=\"error\"}") >= kStreams &&
        metric("placementd_prefetch_streams_open") == 0) {
      break;
    }
    absl::SleepFor(absl::Milliseconds(25));
  }
  EXPECT_EQ(cancelled, kStreams);
  EXPECT_EQ(metric("placementd_prefetch_streams_total{result=\"error\"}"), 0);
  EXPECT_EQ(metric("placementd_prefetch_streams_open"), 0);
}

TEST_F(PrefetchTest, WrongBytesFailTheStreamNamingBatchAndArray) {
  auto raw = OpenRaw(3);
  ASSERT_TRUE(WriteBatch(*raw, MakeBatch(0)));
  ASSERT_TRUE(WriteBatch(*raw, MakeBatch(1), /*truncate_last=*/4));
  raw->stream->WritesDone();
  grpc::Status status = Drain(*raw);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("batch 1: "));
  EXPECT_THAT(status.error_message(), HasSubstr("'labels'"));
  EXPECT_THAT(status.error_message(), HasSubstr("expected 32 bytes for i32[8]"));
  EXPECT_THAT(status.error_message(), HasSubstr("got 28"));
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, BadSpecReachesTheConsumerWithItsCode) {
  // An unknown mesh: NOT_FOUND from the daemon, naming the batch.
  auto it = PrefetchToDevice(*client_, CountingSource(5), Rule::ShardBatchDim("no-such-mesh"));
  ASSERT_TRUE(it.ok());
  auto batch = (*it)->Next();
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(batch.status().message(), HasSubstr("batch 0: "));
  EXPECT_THAT(batch.status().message(), HasSubstr("no-such-mesh"));
  EXPECT_EQ((*it)->Next().status().code(), absl::StatusCode::kNotFound);  // sticks

  // A batch whose bytes do not match its shape, from the source: the
  // batches before it arrive, then INVALID_ARGUMENT at its position.
  auto next = std::make_shared<int>(0);
  auto bad = PrefetchToDevice(*client_, [next]() -> absl::StatusOr<std::optional<HostBatch>> {
    HostBatch batch = MakeBatch(*next);
    if ((*next)++ == 2) batch.arrays[1].bytes.resize(30);
    return std::optional<HostBatch>(std::move(batch));
  });
  ASSERT_TRUE(bad.ok());
  for (int k = 0; k < 2; ++k) {
    auto b = (*bad)->Next();
    ASSERT_TRUE(b.ok() && b->has_value()) << b.status();
    ExpectBatch(**b, k);
  }
  auto third = (*bad)->Next();
  EXPECT_EQ(third.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(third.status().message(), HasSubstr("expected 32 bytes for i32[8], got 30"));
  EXPECT_EQ(MemoryAfterSettling(), 0);
}

TEST_F(PrefetchTest, SourceErrorReachesTheConsumerAtItsPosition) {
  auto next = std::make_shared<int>(0);
  auto it = PrefetchToDevice(*client_, [next]() -> absl::StatusOr<std::optional<HostBatch>> {
    if (*next == 3) return absl::DataLossError("shard 17 of the dataset is corrupt");
    return std::optional<HostBatch>(MakeBatch((*next)++));
  });
  ASSERT_TRUE(it.ok());
  for (int k = 0; k < 3; ++k) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    ExpectBatch(**batch, k);
  }
  auto failed = (*it)->Next();
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(failed.status().message(), "shard 17 of the dataset is corrupt");
  EXPECT_EQ(MemoryAfterSettling(), 0);
}

TEST_F(PrefetchTest, TwoConcurrentPipelines) {
  auto run = [&](int64_t device, int first, std::string* failure) {
    auto next = std::make_shared<int>(first);
    auto it = PrefetchToDevice(
        *client_,
        [next, first]() -> absl::StatusOr<std::optional<HostBatch>> {
          if (*next >= first + 10) return std::optional<HostBatch>();
          return std::optional<HostBatch>(MakeBatch((*next)++));
        },
        Rule(client::Placement::Device(device)));
    if (!it.ok()) {
      *failure = it.status().ToString();
      return;
    }
    for (int k = first;; ++k) {
      auto batch = (*it)->Next();
      if (!batch.ok()) {
        *failure = batch.status().ToString();
        return;
      }
      if (!batch->has_value()) {
        if (k != first + 10) *failure = "ended early at " + std::to_string(k);
        return;
      }
      std::vector<int32_t> labels = Labels((*batch)->tensor("labels"));
      if (labels[0] != k * 100 || (*batch)->tensor("labels").shards[0].device_id != device) {
        *failure = "wrong batch at " + std::to_string(k);
        return;
      }
    }
  };
  std::string a_failure, b_failure;
  std::thread a(run, 1, 0, &a_failure);
  std::thread b(run, 2, 50, &b_failure);
  a.join();
  b.join();
  EXPECT_EQ(a_failure, "");
  EXPECT_EQ(b_failure, "");
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, ShardedBatchesOnATwoDimensionalMesh) {
  client::MeshClient meshes(*client_);
  auto mesh = meshes.Create({{"data", 4}, {"model", 2}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto it = PrefetchToDevice(*client_, CountingSource(4), Rule::ShardBatchDim(*mesh));
  ASSERT_TRUE(it.ok());
  for (int k = 0; k < 4; ++k) {
    auto batch = (*it)->Next();
    ASSERT_TRUE(batch.ok() && batch->has_value()) << batch.status();
    const client::TensorInfo& images = (*batch)->tensor("images");
    ASSERT_EQ(images.shards.size(), 8u);
    // Rows split four ways over "data" and replicated over "model".
    for (const client::ShardInfo& shard : images.shards) {
      int64_t position = shard.device_id;  // mesh over devices 0..7 in order
      EXPECT_EQ(shard.ranges[0].begin, (position / 2) * 2);
      EXPECT_EQ(shard.ranges[0].end, (position / 2) * 2 + 2);
      EXPECT_EQ(shard.replica_id, position % 2);
    }
    EXPECT_EQ(images.device_bytes, 2 * images.size_bytes);
    ExpectBatch(**batch, k);
  }
  auto end = (*it)->Next();
  ASSERT_TRUE(end.ok());
  EXPECT_FALSE(end->has_value());
  EXPECT_EQ(MemoryInUse(), 0);
}

TEST_F(PrefetchTest, ShutdownEndsOpenStreamsWithUnavailable) {
  Start({"--cpu_devices=2", "--drain_timeout=0s"});
  auto stream = PrefetchStream::Open(*client_, PrefetchOptions{});
  ASSERT_TRUE(stream.ok());
  HostBatch batch = MakeBatch(0);
  ASSERT_TRUE((*stream)->SendBatch(batch.Views()).ok());
  auto ready = (*stream)->Read();
  ASSERT_TRUE(ready.ok() && ready->has_value());
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
  auto after = (*stream)->Read();
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable) << after.status();
}

}  // namespace
}  // namespace placement
