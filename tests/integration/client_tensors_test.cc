// Tensors through the client library against a real placementd with 8 CPU
// virtual devices: round trips of every dtype and placement, the chunked
// path with a 64 MiB tensor, partial downloads, reshard chains,
// assemble/disassemble, batches, and the client-side and daemon-side
// errors -- with device memory back to its baseline after every test.
#include <algorithm>
#include <cstring>
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

using ::testing::HasSubstr;

class ClientTensorsTest : public ClientDaemonTest {
 protected:
  // Uploads `data` under `rule`, downloads it whole and compares.
  void ExpectRoundTrip(DType dtype, const std::vector<int64_t>& shape,
                       const std::vector<uint8_t>& data, const Rule& rule) {
    auto info = tensors_->Upload(HostArray{dtype, shape, data}, rule);
    ASSERT_TRUE(info.ok()) << rule.ToString() << ": " << info.status();
    EXPECT_EQ(info->dtype, dtype);
    EXPECT_EQ(std::vector<int64_t>(info->shape.begin(), info->shape.end()), shape);
    EXPECT_EQ(info->size_bytes, static_cast<int64_t>(data.size()));
    auto back = tensors_->DownloadBytes(info->id);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->header.total_bytes, static_cast<int64_t>(data.size()));
    EXPECT_TRUE(back->bytes == data) << DescribeArray(dtype, shape) << " " << rule.ToString();
    ASSERT_TRUE(tensors_->Delete({info->id}).ok());
  }
};

TEST_F(ClientTensorsTest, EveryDTypeRoundTripsOnEveryKindOfPlacement) {
  auto mesh = meshes_->CreateHybrid(2, 4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const DType dtypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16, DType::kI8,
                          DType::kI16, DType::kI32, DType::kI64, DType::kU8,   DType::kBool};
  const std::vector<int64_t> shape = {8, 16};
  for (DType dtype : dtypes) {
    auto data = RandomBytes(static_cast<size_t>(*ExpectedBytes(dtype, shape)),
                            static_cast<uint32_t>(dtype), dtype == DType::kBool);
    ExpectRoundTrip(dtype, shape, data, Rule());
    ExpectRoundTrip(dtype, shape, data, Placement::Device(5));
    ExpectRoundTrip(dtype, shape, data, Placement::Sharded(*mesh, {{"data"}, {"model"}}));
    ExpectRoundTrip(dtype, shape, data, Placement::Sharded(*mesh, {{}, {"data", "model"}}));
    ExpectRoundTrip(dtype, shape, data, Placement::Replicated(*mesh));
  }
}

TEST_F(ClientTensorsTest, EmptyAndScalarArraysRoundTrip) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  ExpectRoundTrip(DType::kF32, {0, 4}, {}, Rule());
  ExpectRoundTrip(DType::kI64, {0}, {}, Placement::Sharded(*mesh, {{"data"}}));
  ExpectRoundTrip(DType::kF64, {}, RandomBytes(8, 1), Placement::Replicated(*mesh));
  ExpectRoundTrip(DType::kBool, {}, {1}, Placement::Device(4));
}

TEST_F(ClientTensorsTest, ShardedTwoDimensionalMeshDescribesAndDownloadsShards) {
  auto mesh = meshes_->CreateHybrid(2, 4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<int64_t> shape = {8, 12};
  auto data = RandomBytes(8 * 12 * 4, 7);
  auto info = tensors_->Upload(HostArray{DType::kF32, shape, data},
                               Placement::Sharded(*mesh, {{"data"}, {"model"}}));
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->shards.size(), 8u);
  EXPECT_EQ(info->device_bytes, static_cast<int64_t>(data.size()));
  // Device at (d, m) holds rows [4d, 4d+4) and columns [3m, 3m+3).
  for (int i = 0; i < 8; ++i) {
    const ShardInfo& s = info->shards[i];
    EXPECT_EQ(s.device_id, i);
    EXPECT_EQ(s.ranges[0].begin, 4 * (i / 4));
    EXPECT_EQ(s.ranges[1].begin, 3 * (i % 4));
    EXPECT_THAT(s.shape, ::testing::ElementsAre(4, 3));
    EXPECT_EQ(s.replica_id, 0);
    auto shard = tensors_->DownloadBytes(info->id, DownloadSelection::Device(s.device_id));
    ASSERT_TRUE(shard.ok()) << shard.status();
    EXPECT_THAT(shard->header.shape, ::testing::ElementsAre(4, 3));
    EXPECT_TRUE(shard->bytes == ExtractBox(data, shape, 4, s)) << "device " << i;
  }
  auto described = tensors_->Describe(info->id);
  ASSERT_TRUE(described.ok());
  EXPECT_EQ(described->shards.size(), 8u);

  // Two devices' shards follow one another in the order of `pieces`.
  auto two = tensors_->DownloadBytes(info->id, DownloadSelection::Devices({6, 1}));
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ(two->header.pieces.size(), 2u);
  std::vector<uint8_t> expected;
  for (const auto& piece : two->header.pieces) {
    auto part = ExtractBox(data, shape, 4, piece);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  EXPECT_TRUE(two->bytes == expected);

  auto node = tensors_->DownloadBytes(info->id, DownloadSelection::Process(0));
  ASSERT_TRUE(node.ok()) << node.status();
  EXPECT_EQ(node->header.total_bytes, static_cast<int64_t>(data.size()));

  EXPECT_EQ(tensors_->DownloadBytes(info->id, DownloadSelection::Device(42)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientTensorsTest, SixtyFourMebibytesThroughTheChunkedPath) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const int64_t n = int64_t{16} << 20;  // 16 Mi floats = 64 MiB
  auto data = RandomBytes(static_cast<size_t>(n * 4), 64);
  // From one caller buffer (the stream forced: a same-host daemon would
  // otherwise take a region, shared_region_test.cc).
  UploadOptions stream_upload;
  stream_upload.path = TransferPath::kStream;
  auto info = tensors_->Upload(HostArray{DType::kF32, {n}, data},
                               Placement::Sharded(*mesh, {{"data"}}), stream_upload);
  ASSERT_TRUE(info.ok()) << info.status();
  std::vector<uint8_t> back(data.size());
  DownloadOptions stream_download;
  stream_download.path = TransferPath::kStream;
  auto header = tensors_->Download(info->id, absl::MakeSpan(back), DownloadSelection::Whole(),
                                   stream_download);
  ASSERT_TRUE(header.ok()) << header.status();
  EXPECT_TRUE(back == data);

  // Incrementally, in pieces that straddle chunk boundaries.
  auto uploader = tensors_->StartUpload(DType::kF32, {n}, Placement::Device(2));
  ASSERT_TRUE(uploader.ok()) << uploader.status();
  for (size_t off = 0; off < data.size(); off += 1000003) {
    size_t len = std::min<size_t>(1000003, data.size() - off);
    ASSERT_TRUE((*uploader)->Write(absl::MakeConstSpan(data.data() + off, len)).ok());
  }
  auto single = (*uploader)->Finish();
  ASSERT_TRUE(single.ok()) << single.status();
  // Chunk by chunk into a callback, with a non-default chunk size.
  int64_t offset = 0;
  bool same = true;
  DownloadOptions options;
  options.chunk_bytes = 3 << 20;
  options.path = TransferPath::kStream;
  auto streamed = tensors_->Download(
      single->id, nullptr,
      [&](absl::Span<const uint8_t> chunk) {
        same = same && std::memcmp(chunk.data(), data.data() + offset, chunk.size()) == 0;
        offset += static_cast<int64_t>(chunk.size());
        return absl::OkStatus();
      },
      DownloadSelection::Whole(), options);
  ASSERT_TRUE(streamed.ok()) << streamed.status();
  EXPECT_EQ(offset, n * 4);
  EXPECT_TRUE(same);
}

TEST_F(ClientTensorsTest, UploadFromReaderAndByteCountErrors) {
  auto data = RandomBytes(5000 * 4, 3);
  size_t pos = 0;
  auto info = tensors_->UploadFrom(DType::kI32, {50, 100}, [&](absl::Span<uint8_t> buffer) {
    size_t n = std::min<size_t>({buffer.size(), data.size() - pos, 333});
    std::memcpy(buffer.data(), data.data() + pos, n);
    pos += n;
    return absl::StatusOr<size_t>(n);
  });
  ASSERT_TRUE(info.ok()) << info.status();
  auto back = tensors_->DownloadBytes(info->id);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->bytes == data);

  // A reader that ends early: nothing is kept.
  auto list_before = tensors_->List();
  ASSERT_TRUE(list_before.ok());
  size_t given = 0;
  auto short_read = tensors_->UploadFrom(DType::kF32, {32, 32}, [&](absl::Span<uint8_t> b) {
    size_t n = std::min<size_t>(b.size(), 4000 - given);
    given += n;
    return absl::StatusOr<size_t>(n);
  });
  EXPECT_EQ(short_read.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(short_read.status().message(), "expected 4096 bytes for f32[32,32], got 4000");

  // Too many bytes: rejected at the Write that overflows.
  auto uploader = tensors_->StartUpload(DType::kF32, {4}, Placement::Device(1));
  ASSERT_TRUE(uploader.ok());
  std::vector<uint8_t> twenty(20);
  absl::Status over = (*uploader)->Write(twenty);
  EXPECT_EQ(over.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(over.message(), HasSubstr("expected 16 bytes for f32[4], got at least 20"));
  EXPECT_EQ((*uploader)->Finish().status().code(), absl::StatusCode::kInvalidArgument);

  // A reader error surfaces with its own code.
  auto failing = tensors_->UploadFrom(DType::kU8, {10}, [](absl::Span<uint8_t>) {
    return absl::StatusOr<size_t>(absl::DataLossError("disk went away"));
  });
  EXPECT_EQ(failing.status().code(), absl::StatusCode::kDataLoss);

  auto list_after = tensors_->List();
  ASSERT_TRUE(list_after.ok());
  EXPECT_EQ(list_after->size(), list_before->size());
}

TEST_F(ClientTensorsTest, CancelMidUploadLeavesNothing) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  const int64_t n = int64_t{4} << 20;
  auto data = RandomBytes(static_cast<size_t>(n * 4), 9);
  {
    auto uploader = tensors_->StartUpload(DType::kF32, {n}, Placement::Sharded(*mesh, {{"data"}}));
    ASSERT_TRUE(uploader.ok()) << uploader.status();
    ASSERT_TRUE((*uploader)->Write(absl::MakeConstSpan(data.data(), data.size() / 2)).ok());
    (*uploader)->Cancel();
    EXPECT_EQ((*uploader)->Finish().status().code(), absl::StatusCode::kCancelled);
  }
  {
    // Destroying an unfinished uploader cancels too.
    auto uploader = tensors_->StartUpload(DType::kF32, {n}, Placement::Device(0));
    ASSERT_TRUE(uploader.ok());
    ASSERT_TRUE((*uploader)->Write(absl::MakeConstSpan(data.data(), 3 << 20)).ok());
  }
  auto list = tensors_->List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
  ExpectMemoryAtBaseline();
}

TEST_F(ClientTensorsTest, DaemonErrorsKeepTheirCodes) {
  std::vector<float> x(16);
  auto unknown_mesh =
      tensors_->Upload(HostArray::Of(x, {16}), Placement::Sharded("nope", {{"data"}}));
  EXPECT_EQ(unknown_mesh.status().code(), absl::StatusCode::kNotFound);
  auto unknown_device = tensors_->Upload(HostArray::Of(x, {16}), Placement::Device(99));
  EXPECT_EQ(unknown_device.status().code(), absl::StatusCode::kNotFound);
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto bad_axis = tensors_->Upload(HostArray::Of(x, {16}), Placement::Sharded(*mesh, {{"model"}}));
  EXPECT_EQ(bad_axis.status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<float> six(6);
  auto indivisible =
      tensors_->Upload(HostArray::Of(six, {6}), Placement::Sharded(*mesh, {{"data"}}));
  EXPECT_EQ(indivisible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(indivisible.status().message(), HasSubstr("6"));
  auto padded =
      tensors_->Upload(HostArray::Of(six, {6}), Placement::Sharded(*mesh, {{"data"}}).Padded());
  ASSERT_TRUE(padded.ok()) << padded.status();

  EXPECT_EQ(tensors_->Describe("t-unknown").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(tensors_->Delete({padded->id, "t-unknown"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(tensors_->Describe(padded->id).ok());  // all or nothing
  std::vector<uint8_t> small(10);
  auto too_small = tensors_->Download(padded->id, absl::MakeSpan(small));
  EXPECT_EQ(too_small.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_small.status().message(), HasSubstr("output buffer holds 10 bytes"));
  EXPECT_EQ(tensors_->DownloadBytes("t-unknown").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientTensorsTest, ReshardChainReturnsTheOriginalBytes) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto hybrid = meshes_->CreateHybrid(2, 4);
  ASSERT_TRUE(hybrid.ok());
  std::vector<int64_t> shape = {16, 8};
  auto data = RandomBytes(16 * 8 * 8, 11);
  auto t = tensors_->Upload(HostArray{DType::kF64, shape, data},
                            Placement::Sharded(*mesh, {{"data"}, {}}), {});
  ASSERT_TRUE(t.ok()) << t.status();
  std::vector<Rule> chain = {Placement::Sharded(*mesh, {{}, {"data"}}),
                             Placement::Replicated(*mesh),
                             Placement::Device(3),
                             Placement::Sharded(*hybrid, {{"model"}, {"data"}}),
                             Rule::Replicate({1, 2}),
                             Placement::Sharded(*mesh, {{"data"}})};
  std::string current = t->id;
  for (const Rule& rule : chain) {
    auto next = tensors_->Place(current, rule, SourceHandling::kDonate);
    ASSERT_TRUE(next.ok()) << rule.ToString() << ": " << next.status();
    EXPECT_EQ(tensors_->Describe(current).status().code(), absl::StatusCode::kNotFound);
    current = next->id;
    auto back = tensors_->DownloadBytes(current);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_TRUE(back->bytes == data) << rule.ToString();
  }
  // Keep: the source stays, the copy is independent.
  auto copy = tensors_->Place(current, Placement::Device(7), SourceHandling::kKeep, "copy");
  ASSERT_TRUE(copy.ok());
  EXPECT_EQ(copy->name, "copy");
  EXPECT_TRUE(tensors_->Describe(current).ok());
  auto many = tensors_->Place({current, copy->id}, Placement::Device(0));
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(many->size(), 2u);
  // A failing place keeps the sources and adds nothing.
  auto list_before = tensors_->List();
  auto failed =
      tensors_->Place({current, "t-unknown"}, Placement::Device(0), SourceHandling::kDonate);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kNotFound);
  auto list_after = tensors_->List();
  ASSERT_TRUE(list_before.ok() && list_after.ok());
  EXPECT_EQ(list_after->size(), list_before->size());
}

TEST_F(ClientTensorsTest, DisassembleAndAssemble) {
  auto mesh = DataMesh(4);
  ASSERT_TRUE(mesh.ok());
  std::vector<int64_t> shape = {8, 3};
  auto data = RandomBytes(8 * 3 * 2, 5);
  auto t =
      tensors_->Upload(HostArray{DType::kBF16, shape, data}, Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  auto parts = tensors_->Disassemble(t->id);
  ASSERT_TRUE(parts.ok()) << parts.status();
  ASSERT_EQ(parts->size(), 4u);
  std::vector<std::string> ids;
  for (size_t i = 0; i < parts->size(); ++i) {
    const auto& part = (*parts)[i];
    EXPECT_THAT(part.shape, ::testing::ElementsAre(2, 3));
    ASSERT_EQ(part.shards.size(), 1u);
    EXPECT_EQ(part.shards[0].device_id, static_cast<int64_t>(i));
    auto bytes = tensors_->DownloadBytes(part.id);
    ASSERT_TRUE(bytes.ok());
    EXPECT_TRUE(bytes->bytes == ExtractBox(data, shape, 2, t->shards[i]));
    ids.push_back(part.id);
  }
  std::reverse(ids.begin(), ids.end());  // any order
  auto whole = tensors_->Assemble(shape, Placement::Sharded(*mesh, {{"data"}}), ids,
                                  SourceHandling::kDonate, "assembled");
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->name, "assembled");
  auto back = tensors_->DownloadBytes(whole->id);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->bytes == data);
  EXPECT_EQ(tensors_->Describe(ids[0]).status().code(), absl::StatusCode::kNotFound);

  // make_array_from_single_device_arrays rules: one per device, shard shapes.
  auto again = tensors_->Disassemble(whole->id);
  ASSERT_TRUE(again.ok());
  std::vector<std::string> three = {(*again)[0].id, (*again)[1].id, (*again)[2].id};
  EXPECT_EQ(tensors_->Assemble(shape, Placement::Sharded(*mesh, {{"data"}}), three).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientTensorsTest, UploadBatchPlacesAGroupUnderOneRule) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto images = RandomBytes(8 * 4 * 4 * 3 * 4, 1);
  auto labels = RandomBytes(8 * 4, 2);
  UploadOptions options;
  options.name = "batch0";
  auto group = tensors_->UploadBatch(
      {{"images", {DType::kF32, {8, 4, 4, 3}, images}}, {"labels", {DType::kI32, {8}, labels}}},
      Placement::Sharded(*mesh, {{"data"}, {}}), options);
  ASSERT_TRUE(group.ok()) << group.status();
  ASSERT_EQ(group->size(), 2u);
  EXPECT_EQ((*group)[0].key, "images");
  EXPECT_EQ((*group)[0].tensor.name, "batch0/images");
  EXPECT_EQ((*group)[1].tensor.shards.size(), 8u);
  EXPECT_THAT((*group)[1].tensor.shards[1].shape, ::testing::ElementsAre(1));
  auto back = tensors_->DownloadBytes((*group)[1].tensor.id);
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->bytes == labels);
  auto listed = tensors_->List("batch0/");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
  auto on_mesh = tensors_->List("", mesh->id);
  ASSERT_TRUE(on_mesh.ok());
  EXPECT_EQ(on_mesh->size(), 2u);

  // All or nothing: an indivisible array fails the whole group.
  auto bad =
      tensors_->UploadBatch({{"ok", {DType::kI32, {8}, labels}},
                             {"odd", {DType::kU8, {6}, absl::MakeConstSpan(labels.data(), 6)}}},
                            Placement::Sharded(*mesh, {{"data"}}));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto after = tensors_->List();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->size(), 2u);
}

TEST_F(ClientTensorsTest, DeleteFreesMemoryAtOnce) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto data = RandomBytes(1 << 20, 4);
  auto t = tensors_->Upload(HostArray{DType::kU8, {1 << 20}, data}, Placement::Replicated(*mesh));
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->device_bytes, 8 << 20);
  auto during = MemoryInUse();
  for (size_t i = 0; i < during.size(); ++i) EXPECT_EQ(during[i] - baseline_[i], 1 << 20) << i;
  auto freed = tensors_->Delete({t->id});
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 8 << 20);
  EXPECT_EQ(MemoryInUse(), baseline_);
}

}  // namespace
}  // namespace placement::client
