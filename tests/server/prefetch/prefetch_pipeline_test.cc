// PrefetchPipeline over real components (CpuBackend, TensorStore,
// TensorOps): admission against buffer_size, in-order delivery, release and
// auto-release, precise errors for bad batches, end of stream, and device
// memory back to its baseline after every ending.
#include "server/prefetch/prefetch_pipeline.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/prefetch/prefetch_metrics.h"
#include "server/service/from_proto.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;
using testing::DownloadWhole;
using testing::ExpectShardsMatch;
using ::testing::HasSubstr;
using testing::PatternBytes;
using testing::TestRig;

struct Array {
  std::string key;
  pb::DType dtype;
  std::vector<int64_t> shape;
};

// A wire BatchHeader, converted as the handler does.
PrefetchBatchHeader Header(const std::vector<Array>& arrays, const std::string& name = "",
                           const std::string& owner = "") {
  pb::BatchHeader header;
  header.set_name(name);
  header.set_owner(owner);
  for (const Array& a : arrays) {
    pb::ArrayHeader* h = header.add_arrays();
    h->set_key(a.key);
    h->set_dtype(a.dtype);
    for (int64_t d : a.shape) h->add_shape(d);
  }
  return BatchHeaderFromProto(header);
}

// images f32[4,8] (128 bytes) + labels i32[4] (16 bytes).
const std::vector<Array> kBatch = {{"images", pb::DTYPE_F32, {4, 8}},
                                   {"labels", pb::DTYPE_I32, {4}}};

class PipelineTest : public ::testing::Test {
 protected:
  std::unique_ptr<PrefetchPipeline> Open(int buffer_size, bool auto_release = false,
                                         pb::PlacementRule rule = {}, std::string name = "") {
    pb::PrefetchOpen open;
    open.set_buffer_size(buffer_size);
    *open.mutable_rule() = rule;
    open.set_name(name);
    open.set_auto_release(auto_release);
    absl::StatusOr<PrefetchConfig> config = PrefetchConfigFromProto(open);
    EXPECT_TRUE(config.ok()) << config.status();
    return std::make_unique<PrefetchPipeline>(rig_.ops.get(), *config, &metrics_);
  }

  // Sends one kBatch-shaped batch whose bytes derive from `seed`, in
  // `chunk`-byte pieces.
  absl::Status Send(PrefetchPipeline& p, uint32_t seed, int64_t chunk = 40) {
    if (absl::Status s = p.OnBatchHeader(Header(kBatch)); !s.ok()) return s;
    for (int i = 0; i < 2; ++i) {
      const std::string bytes = Bytes(i, seed);
      for (size_t off = 0; off < bytes.size(); off += chunk) {
        absl::Status s = p.OnBatchChunk(i, absl::string_view(bytes).substr(off, chunk));
        if (!s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  static std::string Bytes(int array, uint32_t seed) {
    return PatternBytes(array == 0 ? 128 : 16, seed * 10 + array);
  }

  // Takes the next output, which must be the ready of `sequence`, and checks
  // its bytes.
  void ExpectReady(PrefetchPipeline& p, int64_t sequence, uint32_t seed) {
    std::optional<PrefetchOutput> out = p.TakeOutput();
    ASSERT_TRUE(out.has_value());
    ASSERT_TRUE(out->ready.has_value());
    EXPECT_EQ(out->ready->sequence, sequence);
    ASSERT_EQ(out->ready->tensors.size(), 2u);
    EXPECT_EQ(out->ready->tensors[0].first, "images");
    EXPECT_EQ(out->ready->tensors[1].first, "labels");
    for (int i = 0; i < 2; ++i) {
      auto bytes = DownloadWhole(*rig_.ops, out->ready->tensors[i].second->id);
      ASSERT_TRUE(bytes.ok()) << bytes.status();
      EXPECT_EQ(*bytes, Bytes(i, seed)) << "batch " << sequence << " array " << i;
    }
  }

  TestRig rig_;
  PrefetchMetrics metrics_{nullptr};
};

TEST(PrefetchConfigTest, BufferSizeZeroIsTwoAndNegativeIsRejected) {
  pb::PrefetchOpen open;
  auto config = PrefetchConfigFromProto(open);
  ASSERT_TRUE(config.ok());
  EXPECT_EQ(config->buffer_size, 2);
  open.set_buffer_size(-1);
  config = PrefetchConfigFromProto(open);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("open.buffer_size is -1"));
}

TEST_F(PipelineTest, DeliversInOrderAndAdmitsOnlyBufferSizeBatches) {
  auto p = Open(2);
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(Send(*p, 1).ok());
  EXPECT_EQ(p->held(), 2);
  EXPECT_EQ(metrics_.batches_held(), 2);
  EXPECT_EQ(rig_.MemoryInUse(), 2 * 144);

  // A third batch before any release breaks the credit rule.
  absl::Status third = p->OnBatchHeader(Header(kBatch));
  EXPECT_EQ(third.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(third.message(), HasSubstr("batch 2 arrived while 2 batches are held"));

  ExpectReady(*p, 0, 0);
  ExpectReady(*p, 1, 1);
  EXPECT_FALSE(p->TakeOutput().has_value());
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
  EXPECT_EQ(metrics_.batches_held(), 0);
  EXPECT_EQ(metrics_.device_bytes_held(), 0);
}

TEST_F(PipelineTest, ReleaseFreesAndMakesRoom) {
  auto p = Open(2);
  for (uint32_t k = 0; k < 6; ++k) {
    ASSERT_TRUE(Send(*p, k).ok()) << "batch " << k;
    ExpectReady(*p, k, k);
    EXPECT_LE(p->held(), 2);
    EXPECT_LE(rig_.MemoryInUse(), 2 * 144);
    if (k >= 1) ASSERT_TRUE(p->OnRelease(k - 1).ok());
  }
  ASSERT_TRUE(p->OnRelease(5).ok());
  EXPECT_EQ(rig_.MemoryInUse(), 0);
  ASSERT_TRUE(p->OnInputDone().ok());
  std::optional<PrefetchOutput> stats = p->TakeOutput();
  ASSERT_TRUE(stats.has_value() && stats->stats.has_value());
  EXPECT_EQ(stats->stats->batches_staged, 6);
  EXPECT_EQ(stats->stats->bytes_staged, 6 * 144);
  EXPECT_EQ(stats->stats->max_batches_held, 2);
  EXPECT_TRUE(p->done());
}

TEST_F(PipelineTest, ReleaseErrorsAreCoded) {
  auto p = Open(3);
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(Send(*p, 1).ok());
  ExpectReady(*p, 0, 0);
  EXPECT_EQ(p->OnRelease(7).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(p->OnRelease(-1).code(), absl::StatusCode::kInvalidArgument);
  absl::Status undelivered = p->OnRelease(1);
  EXPECT_EQ(undelivered.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(undelivered.message(), HasSubstr("not been delivered"));
  ASSERT_TRUE(p->OnRelease(0).ok());
  absl::Status twice = p->OnRelease(0);
  EXPECT_EQ(twice.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.message(), HasSubstr("already released"));
}

TEST_F(PipelineTest, AutoReleaseNextReleasesThePreviousBatch) {
  auto p = Open(2, /*auto_release=*/true);
  ASSERT_TRUE(p->OnNext().ok());  // asks for batch 0; releases nothing
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(Send(*p, 1).ok());
  ExpectReady(*p, 0, 0);
  ASSERT_TRUE(p->OnNext().ok());  // takes 1, releases 0
  EXPECT_EQ(rig_.MemoryInUse(), 144);
  // Batch 1 has not been delivered: the next Next would release it.
  absl::Status early = p->OnNext();
  EXPECT_EQ(early.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(early.message(), HasSubstr("before batch 1 was delivered"));
  ExpectReady(*p, 1, 1);
  ASSERT_TRUE(p->OnNext().ok());  // releases 1
  EXPECT_EQ(rig_.MemoryInUse(), 0);
  ASSERT_TRUE(p->OnInputDone().ok());
  std::optional<PrefetchOutput> stats = p->TakeOutput();
  ASSERT_TRUE(stats.has_value() && stats->stats.has_value());
  EXPECT_EQ(stats->stats->batches_staged, 2);
}

TEST_F(PipelineTest, ShortBatchFailsNamingBatchAndArray) {
  auto p = Open(2);
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(p->OnBatchHeader(Header(kBatch)).ok());
  ASSERT_TRUE(p->OnBatchChunk(0, Bytes(0, 1)).ok());
  ASSERT_TRUE(p->OnBatchChunk(1, Bytes(1, 1).substr(0, 12)).ok());
  absl::Status status = p->OnBatchHeader(Header(kBatch));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 1: "));
  EXPECT_THAT(status.message(), HasSubstr("'labels'"));
  EXPECT_THAT(status.message(), HasSubstr("expected 16 bytes for i32[4]"));
  EXPECT_THAT(status.message(), HasSubstr("got 12"));
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(PipelineTest, StreamEndingInsideABatchFails) {
  auto p = Open(2);
  ASSERT_TRUE(p->OnBatchHeader(Header(kBatch)).ok());
  ASSERT_TRUE(p->OnBatchChunk(0, Bytes(0, 0).substr(0, 100)).ok());
  absl::Status status = p->OnInputDone();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 0: "));
  EXPECT_THAT(status.message(), HasSubstr("'images'"));
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
  EXPECT_EQ(metrics_.batches_held(), 0);
}

TEST_F(PipelineTest, TooManyBytesFailNamingBatchAndArray) {
  auto p = Open(2);
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(p->OnBatchHeader(Header(kBatch)).ok());
  absl::Status status = p->OnBatchChunk(0, std::string(129, 'x'));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 1: "));
  EXPECT_THAT(status.message(), HasSubstr("'images'"));
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(PipelineTest, BadSpecFailsNamingBatchAndArray) {
  auto p = Open(2);
  ASSERT_TRUE(Send(*p, 0).ok());
  absl::Status status = p->OnBatchHeader(
      Header({{"images", pb::DTYPE_F32, {4, 8}}, {"labels", pb::DTYPE_UNSPECIFIED, {4}}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 1: array 'labels': arrays[1].dtype"));
  status = p->OnBatchHeader(Header({{"images", pb::DTYPE_F32, {4, -8}}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 1: array 'images': arrays[0].shape"));
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

// Names and owner labels are bounded as UploadBatch bounds them: a batch
// whose name (given, or made from the stream's) or owner is too long is
// refused, naming the batch, the field and the numbers, and admits nothing.
TEST_F(PipelineTest, OverlongNamesAndOwnersAreRefused) {
  pb::PrefetchOpen open;
  open.set_name(std::string(300, 's'));
  EXPECT_EQ(PrefetchConfigFromProto(open).status().message(),
            "open.name is 300 bytes long; at most 256");
  // A stream name that fits, whose batch names ("<name>/<batch>") do not.
  auto p = Open(2, false, {}, std::string(255, 's'));
  absl::Status status = p->OnBatchHeader(Header(kBatch));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr("batch 0: its name (open.name/<batch>) is 257 bytes long; at most 256"));
  auto q = Open(2);
  status = q->OnBatchHeader(Header(kBatch, "", std::string(200, 'o')));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("batch 0: batch.owner is 200 bytes long; at most 128"));
  status = q->OnBatchHeader(Header(kBatch, std::string(257, 'n')));
  EXPECT_THAT(status.message(), HasSubstr("batch 0: batch.name is 257 bytes long; at most 256"));
  ASSERT_TRUE(Send(*q, 1).ok());
  p->Close();
  q->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(PipelineTest, ChunkOutsideABatchIsRejected) {
  auto p = Open(2);
  EXPECT_EQ(p->OnBatchChunk(0, "abc").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(Send(*p, 0).ok());
  absl::Status status = p->OnBatchChunk(1, "abc");
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("after batch 0 was complete"));
}

TEST(PipelineBudgetTest, OverBudgetBatchIsResourceExhaustedAndKeepsNothing) {
  // 8 KiB per device: 'a' (a page and its 2 KiB record) fits, 'b' (two
  // pages and the record) does not, wherever it goes.
  TestRig rig(/*num_devices=*/2, /*device_memory=*/8192);
  PrefetchMetrics metrics(nullptr);
  PrefetchPipeline p(rig.ops.get(), PrefetchConfig{}, &metrics);
  absl::Status status =
      p.OnBatchHeader(Header({{"a", pb::DTYPE_F32, {100}}, {"b", pb::DTYPE_F32, {2000}}}));
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(status.message(), HasSubstr("batch 0: "));
  EXPECT_THAT(status.message(), HasSubstr("'b'"));
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ(p.held(), 0);
}

TEST_F(PipelineTest, EndOfStreamDeliversTheRestThenStatsAndCloseFrees) {
  auto p = Open(3, false, {}, "train");
  ASSERT_TRUE(Send(*p, 0).ok());
  ASSERT_TRUE(Send(*p, 1).ok());
  ASSERT_TRUE(p->OnInputDone().ok());
  EXPECT_FALSE(p->done());
  std::optional<PrefetchOutput> first = p->TakeOutput();
  ASSERT_TRUE(first.has_value() && first->ready.has_value());
  EXPECT_EQ(first->ready->tensors[0].second->name, "train/0/images");
  first.reset();
  ExpectReady(*p, 1, 1);
  std::optional<PrefetchOutput> stats = p->TakeOutput();
  ASSERT_TRUE(stats.has_value() && stats->stats.has_value());
  EXPECT_EQ(stats->stats->batches_staged, 2);
  EXPECT_EQ(stats->stats->producer_blocked, absl::ZeroDuration());
  EXPECT_TRUE(p->done());
  EXPECT_FALSE(p->TakeOutput().has_value());
  // Nothing was released: closing deletes both batches.
  EXPECT_EQ(rig_.store->size(), 4);
  p->Close();
  EXPECT_EQ(rig_.store->size(), 0);
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(PipelineTest, ShardBatchDimOnATwoDimensionalMesh) {
  const std::string mesh = rig_.CreateMesh({{"data", 4}, {"model", 2}});
  pb::PlacementRule rule;
  rule.mutable_shard_batch_dim()->set_mesh_id(mesh);
  auto p = Open(2, false, rule);
  ASSERT_TRUE(Send(*p, 3).ok());
  std::optional<PrefetchOutput> out = p->TakeOutput();
  ASSERT_TRUE(out.has_value() && out->ready.has_value());
  const Tensor& images = *out->ready->tensors[0].second;
  ASSERT_EQ(images.shards.size(), 8u);
  // Rows split over "data", replicated over "model": device k holds row k/2.
  for (const Shard& shard : images.shards) {
    EXPECT_EQ(shard.domain.box[0].begin, shard.domain.device_id / 2);
    EXPECT_EQ(shard.domain.box[0].end - shard.domain.box[0].begin, 1);
  }
  ExpectShardsMatch(images, Bytes(0, 3));
  ExpectShardsMatch(*out->ready->tensors[1].second, Bytes(1, 3));
  // Replicas hold their own copy: 2 x the logical bytes.
  out.reset();
  EXPECT_EQ(rig_.MemoryInUse(), 2 * 144);
  p->Close();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(PipelineTest, ZeroByteBatchIsStagedAtItsHeader) {
  auto p = Open(2);
  ASSERT_TRUE(p->OnBatchHeader(Header({{"empty", pb::DTYPE_F32, {0, 3}}})).ok());
  std::optional<PrefetchOutput> out = p->TakeOutput();
  ASSERT_TRUE(out.has_value() && out->ready.has_value());
  EXPECT_EQ(out->ready->sequence, 0);
}

TEST_F(PipelineTest, ConsumerStallIsTimedFromNextToReady) {
  auto p = Open(2);
  ASSERT_TRUE(p->OnNext().ok());
  ASSERT_TRUE(Send(*p, 0).ok());
  ExpectReady(*p, 0, 0);
  ASSERT_TRUE(p->OnInputDone().ok());
  std::optional<PrefetchOutput> stats = p->TakeOutput();
  ASSERT_TRUE(stats.has_value() && stats->stats.has_value());
  EXPECT_GT(stats->stats->consumer_stall, absl::ZeroDuration());
}

}  // namespace
}  // namespace placement::server
