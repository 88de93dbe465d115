// Same-host shared-memory regions against a real placementd (CPU backend, 8
// virtual devices) on 127.0.0.1: the daemon reports this host, round trips of
// every dtype through regions (sharded and replicated) agree byte for byte
// with the gRPC stream, UploadBatch and Download selections through regions,
// bounds errors with their numbers, unregistering while transfers run, and
// the automatic path of TensorClient -- with device memory back to its
// baseline after every test.
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <limits>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/src/client_impl.h"
#include "common/host_identity.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/regions.h"
#include "placement/v1/region_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr DType kDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                             DType::kI16, DType::kI32, DType::kI64, DType::kU8,   DType::kBool};

class RegionTest : public ClientDaemonTest {
 protected:
  void SetUp() override {
    ClientDaemonTest::SetUp();
    regions_ = std::make_unique<RegionClient>(*client_);
    stub_ = pb::TensorService::NewStub(client_->impl().channel);
  }

  void TearDown() override {
    ClientDaemonTest::TearDown();
    // Every region a test made is gone with it (staging regions stay with
    // the Client until it is destroyed).
    client_.reset();
    auto fresh = daemon_->Connect();
    ASSERT_TRUE(fresh.ok());
    auto left = RegionClient(**fresh).List();
    ASSERT_TRUE(left.ok()) << left.status();
    EXPECT_THAT(*left, ::testing::IsEmpty());
  }

  std::unique_ptr<SharedRegion> NewRegion(int64_t size, const std::string& name = "test") {
    auto region = SharedRegion::Create(*client_, size, name);
    EXPECT_TRUE(region.ok()) << region.status();
    return region.ok() ? *std::move(region) : nullptr;
  }

  // An Upload stream of a header for u8[total] on device 0 followed by
  // `slices`; the final status.
  grpc::Status UploadSlices(int64_t total, const std::vector<pb::RegionSlice>& slices) {
    grpc::ClientContext context;
    client_->impl().PrepareContext(&context);
    pb::UploadResponse response;
    auto writer = stub_->Upload(&context, &response);
    pb::UploadRequest message;
    message.mutable_header()->set_dtype(pb::DTYPE_U8);
    message.mutable_header()->add_shape(total);
    bool ok = writer->Write(message);
    for (const pb::RegionSlice& slice : slices) {
      if (!ok) break;
      *message.mutable_region() = slice;
      ok = writer->Write(message);
    }
    if (ok) writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (status.ok()) last_uploaded_ = response.tensor().id();
    return status;
  }

  static pb::RegionSlice Slice(const std::string& id, int64_t offset, int64_t size) {
    pb::RegionSlice slice;
    slice.set_region_id(id);
    slice.set_offset(offset);
    slice.set_size(size);
    return slice;
  }

  std::unique_ptr<RegionClient> regions_;
  std::unique_ptr<pb::TensorService::Stub> stub_;
  std::string last_uploaded_;
};

TEST_F(RegionTest, TheDaemonReportsThisHostAndARegionSocket) {
  auto status = client_->GetStatus();
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ(status->host_id, HostId());
  EXPECT_EQ(status->boot_id, BootId());
  EXPECT_FALSE(status->boot_id.empty());
  // A filesystem socket by default (its mode decides who may connect).
  EXPECT_THAT(status->region_socket, ::testing::MatchesRegex("/.*/placementd-regions-.*\\.sock"));
  auto same = regions_->SameHost();
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(*same);

  auto region = NewRegion(1 << 20, "listed");
  ASSERT_NE(region, nullptr);
  EXPECT_THAT(region->id(), StartsWith("r-"));
  EXPECT_EQ(region->info().size_bytes, 1 << 20);
  EXPECT_FALSE(region->info().pinned);  // CPU virtual devices: nothing to pin
  auto list = regions_->List();
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, region->id());
  EXPECT_EQ((*list)[0].name, "listed");
  EXPECT_EQ(client_->GetStatus()->num_regions, 1);
  ASSERT_TRUE(region->Unregister().ok());
  EXPECT_EQ(client_->GetStatus()->num_regions, 0);
}

TEST_F(RegionTest, EveryDTypeRoundTripsThroughRegionsAsThroughTheStream) {
  auto mesh = meshes_->CreateHybrid(2, 4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::vector<int64_t> shape = {8, 16};
  auto region = NewRegion(1 << 20);
  ASSERT_NE(region, nullptr);
  const int64_t in_offset = 4096, out_offset = 65536;
  UploadOptions stream_up;
  stream_up.path = TransferPath::kStream;
  DownloadOptions stream_down;
  stream_down.path = TransferPath::kStream;
  for (DType dtype : kDTypes) {
    const int64_t bytes = *ExpectedBytes(dtype, shape);
    auto data = RandomBytes(static_cast<size_t>(bytes), 100 + static_cast<int>(dtype),
                            dtype == DType::kBool);
    std::memcpy(region->data() + in_offset, data.data(), data.size());
    for (const Placement& placement :
         {Placement::Sharded(*mesh, {{"data"}, {"model"}}), Placement::Replicated(*mesh)}) {
      const std::string what = absl::StrCat(DescribeArray(dtype, shape), " ", placement.ToString());
      auto through_region = tensors_->UploadFromRegion(*region, in_offset, dtype, shape, placement);
      ASSERT_TRUE(through_region.ok()) << what << ": " << through_region.status();
      auto through_stream = tensors_->Upload(HostArray{dtype, shape, data}, placement, stream_up);
      ASSERT_TRUE(through_stream.ok()) << what << ": " << through_stream.status();
      // Same shards, ranges and replicas either way.
      EXPECT_EQ(through_region->shards, through_stream->shards) << what;
      // Region upload, stream download == the bytes.
      auto streamed =
          tensors_->DownloadBytes(through_region->id, DownloadSelection::Whole(), stream_down);
      ASSERT_TRUE(streamed.ok()) << streamed.status();
      EXPECT_TRUE(streamed->bytes == data) << what;
      // Stream upload, region download == the bytes.
      std::memset(region->data() + out_offset, 0xEE, static_cast<size_t>(bytes));
      auto header = tensors_->DownloadToRegion(through_stream->id, *region, out_offset);
      ASSERT_TRUE(header.ok()) << what << ": " << header.status();
      EXPECT_EQ(header->total_bytes, bytes);
      EXPECT_EQ(std::memcmp(region->data() + out_offset, data.data(), data.size()), 0) << what;
      // One device's shard through a region == through the stream.
      auto shard_stream =
          tensors_->DownloadBytes(through_region->id, DownloadSelection::Device(3), stream_down);
      ASSERT_TRUE(shard_stream.ok());
      auto shard_region = tensors_->DownloadToRegion(through_region->id, *region, out_offset,
                                                     DownloadSelection::Device(3));
      ASSERT_TRUE(shard_region.ok()) << shard_region.status();
      EXPECT_EQ(*shard_region, shard_stream->header);
      EXPECT_EQ(std::memcmp(region->data() + out_offset, shard_stream->bytes.data(),
                            shard_stream->bytes.size()),
                0)
          << what;
      ASSERT_TRUE(tensors_->Delete({through_region->id, through_stream->id}).ok());
    }
  }
}

TEST_F(RegionTest, LargeTensorRoundTripsSpreadOverThreads) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  const int64_t n = int64_t{8} << 20;  // 8 Mi floats = 32 MiB: several copy threads
  auto data = RandomBytes(static_cast<size_t>(n * 4), 7);
  auto region = NewRegion(n * 4);
  ASSERT_NE(region, nullptr);
  std::memcpy(region->data(), data.data(), data.size());
  auto info = tensors_->UploadFromRegion(*region, 0, DType::kF32, {n},
                                         Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  std::memset(region->data(), 0, data.size());
  ASSERT_TRUE(tensors_->DownloadToRegion(info->id, *region, 0).ok());
  EXPECT_EQ(std::memcmp(region->data(), data.data(), data.size()), 0);
}

TEST_F(RegionTest, UploadBatchTakesChunksFromRegions) {
  auto region = NewRegion(1 << 20);
  ASSERT_NE(region, nullptr);
  auto images = RandomBytes(8 * 28 * 28 * 4, 1);
  auto labels = RandomBytes(8 * 4, 2);
  std::memcpy(region->data(), images.data(), images.size());
  std::memcpy(region->data() + 500000, labels.data(), labels.size());
  grpc::ClientContext context;
  client_->impl().PrepareContext(&context);
  pb::UploadBatchResponse response;
  auto writer = stub_->UploadBatch(&context, &response);
  pb::UploadBatchRequest message;
  auto* header = message.mutable_header();
  auto* a = header->add_arrays();
  a->set_key("images");
  a->set_dtype(pb::DTYPE_F32);
  for (int d : {8, 28, 28}) a->add_shape(d);
  auto* b = header->add_arrays();
  b->set_key("labels");
  b->set_dtype(pb::DTYPE_I32);
  b->add_shape(8);
  ASSERT_TRUE(writer->Write(message));
  // Images in two slices (region, then plain bytes), labels from the region.
  message.mutable_chunk()->set_array_index(0);
  *message.mutable_chunk()->mutable_region() = Slice(region->id(), 0, 10000);
  ASSERT_TRUE(writer->Write(message));
  message.mutable_chunk()->clear_region();
  message.mutable_chunk()->set_data(images.data() + 10000, images.size() - 10000);
  ASSERT_TRUE(writer->Write(message));
  message.mutable_chunk()->clear_data();
  message.mutable_chunk()->set_array_index(1);
  *message.mutable_chunk()->mutable_region() = Slice(region->id(), 500000, 32);
  ASSERT_TRUE(writer->Write(message));
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.tensors_size(), 2);
  auto back_images = tensors_->DownloadBytes(response.tensors(0).tensor().id());
  auto back_labels = tensors_->DownloadBytes(response.tensors(1).tensor().id());
  ASSERT_TRUE(back_images.ok() && back_labels.ok());
  EXPECT_TRUE(back_images->bytes == images);
  EXPECT_TRUE(back_labels->bytes == labels);
}

TEST_F(RegionTest, SlicesOutsideTheRegionFailWithTheirNumbersAndKeepNothing) {
  auto region = NewRegion(1 << 20);
  ASSERT_NE(region, nullptr);
  const std::string id = region->id();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

  grpc::Status past = UploadSlices(16, {Slice(id, (1 << 20) + 1, 16)});
  EXPECT_EQ(past.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(past.error_message(), absl::StrCat("region.offset 1048577 is past the end of region ",
                                               id, " (1048576 bytes)"));

  grpc::Status running_over = UploadSlices(16, {Slice(id, (1 << 20) - 8, 16)});
  EXPECT_EQ(running_over.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(running_over.error_message(),
            absl::StrCat("region.offset 1048568 + region.size 16 = 1048584 is past the end of "
                         "region ",
                         id, " (1048576 bytes)"));

  grpc::Status wrapping = UploadSlices(16, {Slice(id, 16, kMax - 8)});
  EXPECT_EQ(wrapping.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(wrapping.error_message(), HasSubstr("overflows int64"));

  grpc::Status negative = UploadSlices(16, {Slice(id, -4096, 16)});
  EXPECT_EQ(negative.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(negative.error_message(), "region.offset must be >= 0, got -4096");

  // More bytes than the tensor holds: the upload's own byte check.
  grpc::Status too_many = UploadSlices(16, {Slice(id, 0, 32)});
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(too_many.error_message(), "expected 16 bytes for u8[16], got at least 32");

  grpc::Status unknown = UploadSlices(16, {Slice("r-00000000000000000000000000000000", 0, 16)});
  EXPECT_EQ(unknown.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(unknown.error_message(), HasSubstr("region.region_id 'r-0000"));

  // A download that does not fit its destination.
  std::vector<uint8_t> data(4096, 1);
  auto info = tensors_->Upload(HostArray{DType::kU8, {4096}, data});
  ASSERT_TRUE(info.ok());
  auto small = tensors_->DownloadToRegion(info->id, *region, (1 << 20) - 100);
  EXPECT_EQ(small.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(small.status().message(),
            "destination.size 100 is less than the 4096 bytes of the download");
  pb::DownloadRequest request;
  request.set_tensor_id(info->id);
  *request.mutable_destination() = Slice(id, kMax - 10, 0);
  grpc::ClientContext context;
  client_->impl().PrepareContext(&context);
  auto reader = stub_->Download(&context, request);
  pb::DownloadResponse ignored;
  while (reader->Read(&ignored)) {
  }
  grpc::Status wrapped = reader->Finish();
  EXPECT_EQ(wrapped.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_THAT(wrapped.error_message(), HasSubstr("destination.offset 9223372036854775797"));

  // A destination offering more room than the region has is OUT_OF_RANGE,
  // even though the download itself (4096 bytes) would fit; before, only the
  // download's own bytes were checked and it succeeded.
  pb::DownloadRequest roomy;
  roomy.set_tensor_id(info->id);
  *roomy.mutable_destination() = Slice(id, 0, (1 << 20) + 1);
  grpc::ClientContext roomy_context;
  client_->impl().PrepareContext(&roomy_context);
  auto roomy_reader = stub_->Download(&roomy_context, roomy);
  while (roomy_reader->Read(&ignored)) {
  }
  grpc::Status past_end = roomy_reader->Finish();
  EXPECT_EQ(past_end.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(past_end.error_message(),
            absl::StrCat("destination.offset 0 + destination.size 1048577 = 1048577 is past the "
                         "end of region ",
                         id, " (1048576 bytes)"));
  // Exactly the region's room is fine.
  *roomy.mutable_destination() = Slice(id, 0, 1 << 20);
  grpc::ClientContext exact_context;
  client_->impl().PrepareContext(&exact_context);
  auto exact_reader = stub_->Download(&exact_context, roomy);
  while (exact_reader->Read(&ignored)) {
  }
  EXPECT_TRUE(exact_reader->Finish().ok());
}

TEST_F(RegionTest, BatchChunksCarryDataOrARegionNotBoth) {
  auto region = NewRegion(1 << 20);
  ASSERT_NE(region, nullptr);
  grpc::ClientContext context;
  client_->impl().PrepareContext(&context);
  pb::UploadBatchResponse response;
  auto writer = stub_->UploadBatch(&context, &response);
  pb::UploadBatchRequest message;
  auto* a = message.mutable_header()->add_arrays();
  a->set_key("x");
  a->set_dtype(pb::DTYPE_U8);
  a->add_shape(8);
  ASSERT_TRUE(writer->Write(message));
  message.mutable_chunk()->set_data("12345678");
  *message.mutable_chunk()->mutable_region() = Slice(region->id(), 0, 8);
  writer->Write(message);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(status.error_message(),
            "chunk carries both data (8 bytes) and region; a BatchChunk's bytes come from one of "
            "them");
}

TEST_F(RegionTest, UnregisterDuringAnUploadFailsItCleanly) {
  auto region = NewRegion(1 << 20);
  ASSERT_NE(region, nullptr);
  grpc::ClientContext context;
  client_->impl().PrepareContext(&context);
  pb::UploadResponse response;
  auto writer = stub_->Upload(&context, &response);
  pb::UploadRequest message;
  message.mutable_header()->set_dtype(pb::DTYPE_U8);
  message.mutable_header()->add_shape(1 << 20);
  ASSERT_TRUE(writer->Write(message));
  *message.mutable_region() = Slice(region->id(), 0, 1 << 19);
  ASSERT_TRUE(writer->Write(message));
  // The first half is in the shards; the region goes away before the second.
  ASSERT_TRUE(region->Unregister().ok());
  *message.mutable_region() = Slice(region->id(), 1 << 19, 1 << 19);
  writer->Write(message);
  writer->WritesDone();
  grpc::Status status = writer->Finish();
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(status.error_message(), HasSubstr(region->id()));
  auto list = tensors_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, ::testing::IsEmpty());
  ExpectMemoryAtBaseline();
}

TEST_F(RegionTest, UnregisterRacingManyTransfersNeverCorruptsOrCrashes) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  constexpr int64_t kBytes = int64_t{4} << 20;
  auto data = RandomBytes(kBytes, 9);
  for (int round = 0; round < 3; ++round) {
    auto region = NewRegion(kBytes);
    ASSERT_NE(region, nullptr);
    std::memcpy(region->data(), data.data(), data.size());
    std::atomic<int> ok{0}, not_found{0}, other{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; ++t) {
      threads.emplace_back([&] {
        for (int i = 0; i < 4; ++i) {
          auto info = tensors_->UploadFromRegion(*region, 0, DType::kU8, {kBytes},
                                                 Placement::Sharded(*mesh, {{"data"}}));
          if (info.ok()) {
            auto back = tensors_->DownloadBytes(info->id);
            if (back.ok() && back->bytes == data) {
              ++ok;
            } else {
              ++other;
            }
            (void)tensors_->Delete({info->id});
          } else if (info.status().code() == absl::StatusCode::kNotFound) {
            ++not_found;
          } else {
            ++other;
          }
        }
      });
    }
    // Unregister once transfers are known to be under way.
    while (ok.load() + other.load() == 0) std::this_thread::yield();
    ASSERT_TRUE(region->Unregister().ok());
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(other.load(), 0);
    EXPECT_EQ(ok.load() + not_found.load(), 12);
  }
  ExpectMemoryAtBaseline();
}

TEST_F(RegionTest, TensorClientTakesAStagingRegionForLargeArraysByItself) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  // 768 KiB: a region's size (arrays of 1 MiB or more are written in place,
  // inplace_upload_test.cc).
  auto data = RandomBytes(int64_t{3} << 18, 11);
  auto info = tensors_->Upload(HostArray{DType::kF32, {int64_t{3} << 16}, data},
                               Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  // The staging region the upload used is registered and waits for reuse.
  auto list = regions_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "placement-staging");
  std::vector<uint8_t> back(data.size());
  ASSERT_TRUE(tensors_->Download(info->id, absl::MakeSpan(back)).ok());
  EXPECT_TRUE(back == data);
  EXPECT_EQ(regions_->List()->size(), 1u);  // reused, not a second one
  // Forced stream: same bytes, no region involved.
  DownloadOptions stream;
  stream.path = TransferPath::kStream;
  std::vector<uint8_t> streamed(data.size());
  ASSERT_TRUE(
      tensors_->Download(info->id, absl::MakeSpan(streamed), DownloadSelection::Whole(), stream)
          .ok());
  EXPECT_TRUE(streamed == data);
  // A too-small buffer is the same error on both paths.
  std::vector<uint8_t> small(100);
  auto refused = tensors_->Download(info->id, absl::MakeSpan(small));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("output buffer holds 100 bytes"));
}

TEST_F(RegionTest, UploadBatchOfLargeArraysTakesAStagingRegion) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto images = RandomBytes(64 * 32 * 32 * 4, 21);
  auto labels = RandomBytes(64 * 4, 22);
  std::vector<BatchArray> arrays = {{"images", HostArray{DType::kF32, {64, 32, 32}, images}},
                                    {"labels", HostArray{DType::kI32, {64}, labels}}};
  auto named = tensors_->UploadBatch(arrays, Rule::ShardBatchDim(*mesh));
  ASSERT_TRUE(named.ok()) << named.status();
  ASSERT_EQ(named->size(), 2u);
  auto list = regions_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "placement-staging");
  UploadOptions stream;
  stream.path = TransferPath::kStream;
  auto streamed = tensors_->UploadBatch(arrays, Rule::ShardBatchDim(*mesh), stream);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*named)[i].tensor.shards, (*streamed)[i].tensor.shards);
    auto a = tensors_->DownloadBytes((*named)[i].tensor.id);
    auto b = tensors_->DownloadBytes((*streamed)[i].tensor.id);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_TRUE(a->bytes == (i == 0 ? images : labels));
    EXPECT_TRUE(b->bytes == a->bytes);
  }
}

// What placectl tensor put / get use: a ByteReader upload and a callback
// download, both through a staging region against a local daemon.
TEST_F(RegionTest, ReaderUploadsAndCallbackDownloadsTakeStagingRegions) {
  auto data = RandomBytes(int64_t{2} << 20, 12);
  size_t read = 0;
  ByteReader reader = [&](absl::Span<uint8_t> buffer) -> absl::StatusOr<size_t> {
    size_t n = std::min(buffer.size(), std::min<size_t>(100000, data.size() - read));
    std::memcpy(buffer.data(), data.data() + read, n);
    read += n;
    return n;
  };
  auto info = tensors_->UploadFrom(DType::kU8, {int64_t{2} << 20}, reader);
  ASSERT_TRUE(info.ok()) << info.status();
  auto list = regions_->List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].name, "placement-staging");
  std::vector<uint8_t> back;
  bool header_seen = false;
  auto header = tensors_->Download(
      info->id,
      [&](const DownloadHeader& h) {
        header_seen = true;
        EXPECT_EQ(h.total_bytes, static_cast<int64_t>(data.size()));
        return absl::OkStatus();
      },
      [&](absl::Span<const uint8_t> chunk) {
        EXPECT_LE(chunk.size(), size_t{1} << 20);
        back.insert(back.end(), chunk.begin(), chunk.end());
        return absl::OkStatus();
      });
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_TRUE(header_seen);
  EXPECT_TRUE(back == data);
  EXPECT_EQ(regions_->List()->size(), 1u);
  // A reader that ends early: the stream path's error, nothing kept.
  size_t short_read = 0;
  ByteReader short_reader = [&](absl::Span<uint8_t> buffer) -> absl::StatusOr<size_t> {
    if (short_read >= 1000) return size_t{0};
    size_t n = std::min<size_t>(buffer.size(), 1000);
    short_read += n;
    return n;
  };
  auto refused = tensors_->UploadFrom(DType::kU8, {int64_t{1} << 20}, short_reader);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(), "expected 1048576 bytes for u8[1048576], got 1000");
}

// A daemon without fd passing: kAuto falls back to the stream, kRegion says
// why it cannot.
TEST(RegionlessDaemonTest, AutoFallsBackToTheStreamAndForcedRegionIsRefused) {
  testing::DaemonOptions options;
  options.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--region_socket="};
  auto daemon = testing::DaemonProcess::Start(options);
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  auto client = (*daemon)->Connect();
  ASSERT_TRUE(client.ok());
  EXPECT_EQ((*client)->GetStatus()->region_socket, "");
  EXPECT_FALSE(*RegionClient(**client).SameHost());
  TensorClient tensors(**client);
  std::vector<uint8_t> data(1 << 20, 3);
  auto info = tensors.Upload(HostArray{DType::kU8, {1 << 20}, data});
  ASSERT_TRUE(info.ok()) << info.status();
  UploadOptions forced;
  forced.path = TransferPath::kRegion;
  auto refused = tensors.Upload(HostArray{DType::kU8, {1 << 20}, data}, {}, forced);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("is not on this host"));
  auto region = SharedRegion::Create(**client, 4096);
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace placement::client
