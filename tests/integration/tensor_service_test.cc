// TensorService and MeshService on a real placementd process (8 CPU virtual
// devices, 127.0.0.1 port 0), driven through the raw generated stubs: every
// byte crosses real gRPC streams. Every failure case is followed by a check
// that ListDevices memory is back to its baseline and the daemon still serves.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/mesh_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/trainer_call.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using ::placement::testing::DaemonOptions;
using ::placement::testing::DaemonProcess;
using ::placement::testing::ReadyChannel;

std::string Pattern(int64_t n, uint32_t seed, bool boolean = false) {
  std::string out(static_cast<size_t>(n), '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (auto& c : out) {
    x = x * 1664525u + 1013904223u;
    c = static_cast<char>(boolean ? (x >> 31) : (x >> 24));
  }
  return out;
}

int64_t DTypeBytes(pb::DType dtype) {
  switch (dtype) {
    case pb::DTYPE_F64:
    case pb::DTYPE_I64:
      return 8;
    case pb::DTYPE_F32:
    case pb::DTYPE_I32:
      return 4;
    case pb::DTYPE_F16:
    case pb::DTYPE_BF16:
    case pb::DTYPE_I16:
      return 2;
    default:
      return 1;
  }
}

// One connection's stubs plus helpers that speak the raw protocol.
class Conn {
 public:
  explicit Conn(const std::string& address)
      : channel_(ReadyChannel(address)),
        tensors_(pb::TensorService::NewStub(channel_)),
        meshes_(pb::MeshService::NewStub(channel_)),
        devices_(pb::DeviceService::NewStub(channel_)) {}

  pb::TensorService::Stub& tensors() { return *tensors_; }
  pb::MeshService::Stub& meshes() { return *meshes_; }

  int64_t MemoryInUse() {
    grpc::ClientContext ctx;
    pb::ListDevicesResponse response;
    grpc::Status status = devices_->ListDevices(&ctx, pb::ListDevicesRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    int64_t total = 0;
    for (const auto& d : response.devices()) total += d.memory_in_use_bytes();
    return total;
  }

  grpc::Status Upload(pb::DType dtype, const std::vector<int64_t>& shape,
                      const pb::PlacementRule& rule, const std::string& bytes, pb::TensorInfo* info,
                      int64_t chunk = 1 << 20, const std::string& name = "") {
    grpc::ClientContext ctx;
    pb::UploadResponse response;
    auto writer = tensors_->Upload(&ctx, &response);
    pb::UploadRequest request;
    pb::UploadHeader* header = request.mutable_header();
    header->set_dtype(dtype);
    for (int64_t d : shape) header->add_shape(d);
    header->set_name(name);
    *header->mutable_rule() = rule;
    bool ok = writer->Write(request);
    for (size_t offset = 0; ok && offset < bytes.size(); offset += chunk) {
      request.set_chunk(bytes.substr(offset, chunk));
      ok = writer->Write(request);
    }
    writer->WritesDone();
    grpc::Status status = writer->Finish();
    if (info != nullptr) *info = response.tensor();
    return status;
  }

  grpc::Status Download(pb::DownloadRequest request, std::string* bytes,
                        pb::DownloadHeader* header = nullptr) {
    grpc::ClientContext ctx;
    auto reader = tensors_->Download(&ctx, request);
    pb::DownloadResponse response;
    bytes->clear();
    while (reader->Read(&response)) {
      if (response.has_header()) {
        if (header != nullptr) *header = response.header();
      } else {
        EXPECT_LE(response.chunk().size(), size_t{4} << 20);
        bytes->append(response.chunk());
      }
    }
    return reader->Finish();
  }

  std::string DownloadWhole(const std::string& id) {
    pb::DownloadRequest request;
    request.set_tensor_id(id);
    std::string bytes;
    grpc::Status status = Download(request, &bytes);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return bytes;
  }

  std::string CreateMesh(const std::vector<std::pair<std::string, int64_t>>& axes,
                         const std::vector<int64_t>& devices = {}) {
    grpc::ClientContext ctx;
    pb::CreateMeshRequest request;
    for (const auto& [name, size] : axes) {
      pb::MeshAxis* axis = request.mutable_axes()->add_axes();
      axis->set_name(name);
      axis->set_size(size);
    }
    for (int64_t d : devices) request.add_device_ids(d);
    pb::CreateMeshResponse response;
    grpc::Status status = meshes_->CreateMesh(&ctx, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response.mesh().id();
  }

  grpc::Status DeleteMesh(const std::string& id, bool force, int64_t* deleted = nullptr) {
    grpc::ClientContext ctx;
    pb::DeleteMeshRequest request;
    request.set_mesh_id(id);
    request.set_force(force);
    pb::DeleteMeshResponse response;
    grpc::Status status = meshes_->DeleteMesh(&ctx, request, &response);
    if (deleted != nullptr) *deleted = response.deleted_tensors();
    return status;
  }

  grpc::Status Delete(const std::vector<std::string>& ids) {
    grpc::ClientContext ctx;
    pb::DeleteTensorsRequest request;
    for (const auto& id : ids) request.add_tensor_ids(id);
    pb::DeleteTensorsResponse response;
    return tensors_->Delete(&ctx, request, &response);
  }

  grpc::Status Place(const std::vector<std::string>& ids, const pb::PlacementRule& rule,
                     pb::SourceHandling source, pb::PlaceResponse* response) {
    grpc::ClientContext ctx;
    pb::PlaceRequest request;
    for (const auto& id : ids) request.add_tensor_ids(id);
    *request.mutable_rule() = rule;
    request.set_source(source);
    return tensors_->Place(&ctx, request, response);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::TensorService::Stub> tensors_;
  std::unique_ptr<pb::MeshService::Stub> meshes_;
  std::unique_ptr<pb::DeviceService::Stub> devices_;
};

pb::PlacementRule OnDevice(int64_t device) {
  pb::PlacementRule rule;
  rule.mutable_placement()->set_device_id(device);
  return rule;
}

pb::PlacementRule Sharded(const std::string& mesh,
                          const std::vector<std::vector<std::string>>& spec,
                          pb::ShardingMode mode = pb::SHARDING_MODE_EVEN) {
  pb::PlacementRule rule;
  pb::Sharding* s = rule.mutable_placement()->mutable_sharding();
  s->set_mesh_id(mesh);
  s->set_mode(mode);
  for (const auto& axes : spec) {
    pb::DimSharding* dim = s->mutable_spec()->add_dims();
    for (const auto& a : axes) dim->add_axes(a);
  }
  return rule;
}

pb::PlacementRule Replicated(const std::string& mesh) {
  pb::PlacementRule rule;
  rule.mutable_placement()->set_replicated_mesh_id(mesh);
  return rule;
}

class TensorServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto daemon = DaemonProcess::Start(DaemonOptions{{"--cpu_devices=8"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon).release();
  }
  static void TearDownTestSuite() {
    delete daemon_;
    daemon_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(daemon_, nullptr);
    conn_ = std::make_unique<Conn>(daemon_->address());
    baseline_ = conn_->MemoryInUse();
    xy_ = conn_->CreateMesh({{"x", 2}, {"y", 4}});
  }
  void TearDown() override {
    conn_->DeleteMesh(xy_, /*force=*/true);
    ExpectBaselineAndServing();
  }
  // Memory back to the baseline, and a fresh upload still works.
  void ExpectBaselineAndServing() {
    EXPECT_EQ(conn_->MemoryInUse(), baseline_);
    pb::TensorInfo info;
    grpc::Status status = conn_->Upload(pb::DTYPE_U8, {4}, OnDevice(0), "abcd", &info);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(conn_->DownloadWhole(info.id()), "abcd");
    EXPECT_TRUE(conn_->Delete({info.id()}).ok());
    EXPECT_EQ(conn_->MemoryInUse(), baseline_);
  }

  static DaemonProcess* daemon_;
  std::unique_ptr<Conn> conn_;
  int64_t baseline_ = 0;
  std::string xy_;
};

DaemonProcess* TensorServiceTest::daemon_ = nullptr;

TEST_F(TensorServiceTest, RoundTripEveryDtypeAndPlacement) {
  const std::string r8 = conn_->CreateMesh({{"r", 8}});
  for (int d = pb::DTYPE_F32; d <= pb::DTYPE_BOOL; ++d) {
    const auto dtype = static_cast<pb::DType>(d);
    const std::vector<int64_t> shape = {16, 24};
    const std::string data = Pattern(16 * 24 * DTypeBytes(dtype), d, dtype == pb::DTYPE_BOOL);
    for (const auto& rule : {OnDevice(3), Sharded(xy_, {{"x"}, {"y"}}), Replicated(r8),
                             Sharded(xy_, {{"y", "x"}}), Sharded(r8, {{}, {"r"}})}) {
      SCOPED_TRACE(pb::DType_Name(dtype) + " " + rule.ShortDebugString());
      pb::TensorInfo info;
      grpc::Status status = conn_->Upload(dtype, shape, rule, data, &info, /*chunk=*/1000);
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_EQ(info.dtype(), dtype);
      EXPECT_EQ(info.size_bytes(), static_cast<int64_t>(data.size()));
      EXPECT_EQ(conn_->DownloadWhole(info.id()), data);
      ASSERT_TRUE(conn_->Delete({info.id()}).ok());
    }
  }
  // A multi-chunk tensor (2 MiB) with the default 1 MiB chunks both ways.
  const std::string big = Pattern(2 << 20, 99);
  pb::TensorInfo info;
  ASSERT_TRUE(
      conn_->Upload(pb::DTYPE_F32, {512, 1024}, Sharded(xy_, {{"x"}, {"y"}}), big, &info).ok());
  EXPECT_EQ(info.device_bytes(), 2 << 20);
  EXPECT_EQ(conn_->MemoryInUse(), baseline_ + (2 << 20));
  EXPECT_EQ(conn_->DownloadWhole(info.id()), big);
  ASSERT_TRUE(conn_->Delete({info.id()}).ok());
  ASSERT_TRUE(conn_->DeleteMesh(r8, false).ok());
}

TEST_F(TensorServiceTest, DescribeListAndDownloadSelections) {
  const std::string data = Pattern(8 * 4 * 4, 5);
  pb::TensorInfo info;
  ASSERT_TRUE(
      conn_->Upload(pb::DTYPE_F32, {8, 4}, Sharded(xy_, {{"y"}}), data, &info, 7, "batch/x").ok());
  grpc::ClientContext ctx;
  pb::DescribeRequest describe;
  describe.set_tensor_id(info.id());
  pb::DescribeResponse described;
  ASSERT_TRUE(conn_->tensors().Describe(&ctx, describe, &described).ok());
  const pb::TensorInfo& t = described.tensor();
  EXPECT_EQ(t.name(), "batch/x");
  EXPECT_EQ(t.sharding().mesh_id(), xy_);
  ASSERT_EQ(t.shards_size(), 8);
  EXPECT_EQ(t.shards(5).device_id(), 5);  // coords (1, 1): rows 2..4, replica 1
  EXPECT_EQ(t.shards(5).ranges(0).begin(), 2);
  EXPECT_EQ(t.shards(5).ranges(0).end(), 4);
  EXPECT_EQ(t.shards(5).replica_id(), 1);
  EXPECT_EQ(t.device_bytes(), 2 * 128);

  grpc::ClientContext list_ctx;
  pb::ListTensorsRequest list;
  list.set_name_prefix("batch/");
  pb::ListTensorsResponse listed;
  ASSERT_TRUE(conn_->tensors().List(&list_ctx, list, &listed).ok());
  ASSERT_EQ(listed.tensors_size(), 1);
  EXPECT_EQ(listed.tensors(0).id(), info.id());

  pb::DownloadRequest request;
  request.set_tensor_id(info.id());
  request.set_device_id(6);  // rows 4..6
  std::string bytes;
  pb::DownloadHeader header;
  ASSERT_TRUE(conn_->Download(request, &bytes, &header).ok());
  EXPECT_EQ(bytes, data.substr(4 * 16, 2 * 16));
  EXPECT_EQ(header.shape(0), 2);
  request.mutable_devices()->add_device_ids(7);
  request.mutable_devices()->add_device_ids(0);
  request.mutable_devices()->add_device_ids(4);
  ASSERT_TRUE(conn_->Download(request, &bytes, &header).ok());
  EXPECT_EQ(header.pieces_size(), 2);  // device 4 repeats device 0's rows
  EXPECT_EQ(bytes, data.substr(0, 32) + data.substr(6 * 16, 32));
  request.set_process_index(0);
  request.set_chunk_size_bytes(5);
  ASSERT_TRUE(conn_->Download(request, &bytes, &header).ok());
  EXPECT_EQ(bytes, data);
  request.set_chunk_size_bytes(int64_t{8} << 20);
  EXPECT_EQ(conn_->Download(request, &bytes).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  ASSERT_TRUE(conn_->Delete({info.id()}).ok());
}

TEST_F(TensorServiceTest, WrongByteCounts) {
  pb::TensorInfo info;
  grpc::Status few =
      conn_->Upload(pb::DTYPE_F32, {32, 32}, Sharded(xy_, {{"x"}}), Pattern(4000, 1), &info);
  EXPECT_EQ(few.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(few.error_message(), "expected 4096 bytes for f32[32,32], got 4000");
  ExpectBaselineAndServing();
  grpc::Status many = conn_->Upload(pb::DTYPE_I16, {10}, OnDevice(2), Pattern(30, 1), &info, 8);
  EXPECT_EQ(many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(many.error_message(), "expected 20 bytes for i16[10], got at least 24");
}

TEST_F(TensorServiceTest, UnknownIds) {
  pb::TensorInfo info;
  EXPECT_EQ(conn_->Upload(pb::DTYPE_F32, {4}, Replicated("no-such-mesh"), Pattern(16, 1), &info)
                .error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(conn_->Upload(pb::DTYPE_F32, {4}, OnDevice(77), Pattern(16, 1), &info).error_code(),
            grpc::StatusCode::NOT_FOUND);
  std::string bytes;
  pb::DownloadRequest download;
  download.set_tensor_id("t-missing");
  EXPECT_EQ(conn_->Download(download, &bytes).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status deleted = conn_->Delete({"t-missing"});
  EXPECT_EQ(deleted.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(deleted.error_message(), "tensor 't-missing' does not exist");
  pb::PlaceResponse placed;
  EXPECT_EQ(
      conn_->Place({"t-missing"}, OnDevice(0), pb::SOURCE_HANDLING_KEEP, &placed).error_code(),
      grpc::StatusCode::NOT_FOUND);
  grpc::ClientContext ctx1, ctx2, ctx3;
  pb::DescribeRequest describe;
  describe.set_tensor_id("t-missing");
  pb::DescribeResponse described;
  EXPECT_EQ(conn_->tensors().Describe(&ctx1, describe, &described).error_code(),
            grpc::StatusCode::NOT_FOUND);
  pb::DisassembleRequest disassemble;
  disassemble.set_tensor_id("t-missing");
  pb::DisassembleResponse pieces;
  EXPECT_EQ(conn_->tensors().Disassemble(&ctx2, disassemble, &pieces).error_code(),
            grpc::StatusCode::NOT_FOUND);
  pb::GetMeshRequest get;
  get.set_mesh_id("no-such-mesh");
  pb::GetMeshResponse mesh;
  EXPECT_EQ(conn_->meshes().GetMesh(&ctx3, get, &mesh).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(conn_->DeleteMesh("no-such-mesh", true).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(TensorServiceTest, BadSpecsAndMalformedStreams) {
  pb::TensorInfo info;
  auto expect_invalid = [&](pb::DType dtype, std::vector<int64_t> shape,
                            const pb::PlacementRule& rule, const std::string& fragment) {
    int64_t n = 1;
    for (int64_t d : shape) n *= std::max<int64_t>(d, 0);
    grpc::Status s = conn_->Upload(dtype, shape, rule, Pattern(n * 4, 1), &info);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
    EXPECT_NE(s.error_message().find(fragment), std::string::npos) << s.error_message();
  };
  expect_invalid(pb::DTYPE_F32, {8}, Sharded(xy_, {{"z"}}), "'z'");
  expect_invalid(pb::DTYPE_F32, {8, 8}, Sharded(xy_, {{"x"}, {"x"}}), "duplicate");
  expect_invalid(pb::DTYPE_F32, {8}, Sharded(xy_, {{"x"}, {"y"}}), "rank");
  expect_invalid(pb::DTYPE_F32, {6, 6}, Sharded(xy_, {{}, {"y"}}), "6 is not divisible by 4");
  expect_invalid(pb::DTYPE_UNSPECIFIED, {4}, OnDevice(0), "header.dtype");
  expect_invalid(pb::DTYPE_F32, {4, -2}, OnDevice(0), "-2");
  // Malformed streams: chunk first, two headers, no header at all.
  for (int variant = 0; variant < 3; ++variant) {
    grpc::ClientContext ctx;
    pb::UploadResponse response;
    auto writer = conn_->tensors().Upload(&ctx, &response);
    pb::UploadRequest header;
    header.mutable_header()->set_dtype(pb::DTYPE_U8);
    header.mutable_header()->add_shape(4);
    pb::UploadRequest chunk;
    chunk.set_chunk("abcd");
    if (variant == 0) writer->Write(chunk);
    if (variant == 1) {
      writer->Write(header);
      writer->Write(header);
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
        << variant << ": " << s.error_message();
  }
  ExpectBaselineAndServing();
}

TEST_F(TensorServiceTest, ClientCancelMidUploadFreesEverything) {
  grpc::ClientContext ctx;
  pb::UploadResponse response;
  auto writer = conn_->tensors().Upload(&ctx, &response);
  pb::UploadRequest request;
  request.mutable_header()->set_dtype(pb::DTYPE_F32);
  request.mutable_header()->add_shape(1 << 20);  // 4 MiB, replicated: 32 MiB on the devices
  request.mutable_header()->mutable_rule()->mutable_replicate();
  ASSERT_TRUE(writer->Write(request));
  request.set_chunk(Pattern(1 << 20, 3));
  ASSERT_TRUE(writer->Write(request));
  // Wait (bounded) until the daemon holds every shard (it allocates them
  // device by device), then cancel.
  for (int i = 0; i < 500 && conn_->MemoryInUse() < baseline_ + (int64_t{32} << 20); ++i)
    absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(conn_->MemoryInUse(), baseline_ + (int64_t{32} << 20));
  ctx.TryCancel();
  EXPECT_EQ(writer->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The daemon frees on its side of the cancellation; poll (bounded).
  for (int i = 0; i < 500 && conn_->MemoryInUse() != baseline_; ++i)
    absl::SleepFor(absl::Milliseconds(10));
  ExpectBaselineAndServing();
  grpc::ClientContext list_ctx;
  pb::ListTensorsResponse listed;
  ASSERT_TRUE(conn_->tensors().List(&list_ctx, pb::ListTensorsRequest(), &listed).ok());
  EXPECT_EQ(listed.tensors_size(), 0);
}

TEST_F(TensorServiceTest, PlaceChainAssembleDisassemble) {
  const std::string data = Pattern(8 * 12 * 2, 8);
  pb::TensorInfo info;
  ASSERT_TRUE(conn_->Upload(pb::DTYPE_BF16, {8, 12}, OnDevice(0), data, &info).ok());
  std::string id = info.id();
  pb::PlacementRule shard_batch;
  shard_batch.mutable_shard_batch_dim()->set_mesh_id(xy_);
  shard_batch.mutable_shard_batch_dim()->set_mesh_axis("y");
  for (const auto& rule : {Sharded(xy_, {{"x"}, {"y"}}), Replicated(xy_), shard_batch,
                           Sharded(xy_, {{"y", "x"}}), OnDevice(5), OnDevice(0)}) {
    pb::PlaceResponse placed;
    grpc::Status s = conn_->Place({id}, rule, pb::SOURCE_HANDLING_DONATE, &placed);
    ASSERT_TRUE(s.ok()) << s.error_message();
    id = placed.tensors(0).id();
    ASSERT_EQ(conn_->DownloadWhole(id), data);
  }
  EXPECT_EQ(conn_->MemoryInUse(), baseline_ + static_cast<int64_t>(data.size()));
  pb::PlaceResponse sharded;
  ASSERT_TRUE(
      conn_->Place({id}, Sharded(xy_, {{"y"}, {"x"}}), pb::SOURCE_HANDLING_DONATE, &sharded).ok());
  grpc::ClientContext dctx;
  pb::DisassembleRequest disassemble;
  disassemble.set_tensor_id(sharded.tensors(0).id());
  disassemble.set_source(pb::SOURCE_HANDLING_DONATE);
  pb::DisassembleResponse pieces;
  ASSERT_TRUE(conn_->tensors().Disassemble(&dctx, disassemble, &pieces).ok());
  ASSERT_EQ(pieces.tensors_size(), 8);
  EXPECT_EQ(pieces.tensors(1).shape(0), 2);
  grpc::ClientContext actx;
  pb::AssembleRequest assemble;
  assemble.add_shape(8);
  assemble.add_shape(12);
  *assemble.mutable_placement() = Sharded(xy_, {{"y"}, {"x"}}).placement();
  for (int i = 7; i >= 0; --i) assemble.add_tensor_ids(pieces.tensors(i).id());
  assemble.set_source(pb::SOURCE_HANDLING_DONATE);
  // A wrong shape names the device and both shapes; nothing is taken.
  grpc::ClientContext bctx;
  pb::AssembleRequest bad = assemble;
  bad.set_shape(0, 16);
  pb::AssembleResponse unused;
  grpc::Status s = conn_->tensors().Assemble(&bctx, bad, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("expects shard shape [4,6] on device 0"), std::string::npos)
      << s.error_message();
  pb::AssembleResponse assembled;
  ASSERT_TRUE(conn_->tensors().Assemble(&actx, assemble, &assembled).ok());
  EXPECT_EQ(conn_->DownloadWhole(assembled.tensor().id()), data);
  EXPECT_EQ(conn_->MemoryInUse(), baseline_ + static_cast<int64_t>(data.size()));
  ASSERT_TRUE(conn_->Delete({assembled.tensor().id()}).ok());
}

TEST_F(TensorServiceTest, UploadBatchUnderOneRule) {
  const std::string dp = conn_->CreateMesh({{"data", 8}});
  auto run = [&](int64_t labels_bytes, pb::UploadBatchResponse* response) {
    grpc::ClientContext ctx;
    auto writer = conn_->tensors().UploadBatch(&ctx, response);
    pb::UploadBatchRequest request;
    pb::BatchHeader* header = request.mutable_header();
    header->set_name("step0");
    auto* images = header->add_arrays();
    images->set_key("images");
    images->set_dtype(pb::DTYPE_F32);
    for (int64_t d : {8, 4, 4, 3}) images->add_shape(d);
    auto* labels = header->add_arrays();
    labels->set_key("labels");
    labels->set_dtype(pb::DTYPE_I32);
    labels->add_shape(8);
    header->mutable_rule()->mutable_shard_batch_dim()->set_mesh_id(dp);
    writer->Write(request);
    const std::string image_bytes = Pattern(8 * 4 * 4 * 3 * 4, 1);
    for (size_t off = 0; off < image_bytes.size(); off += 500) {
      request.mutable_chunk()->set_array_index(0);
      request.mutable_chunk()->set_data(image_bytes.substr(off, 500));
      writer->Write(request);
    }
    request.mutable_chunk()->set_array_index(1);
    request.mutable_chunk()->set_data(Pattern(labels_bytes, 2));
    writer->Write(request);
    writer->WritesDone();
    return writer->Finish();
  };
  pb::UploadBatchResponse response;
  grpc::Status short_labels = run(28, &response);
  EXPECT_EQ(short_labels.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(short_labels.error_message().find("expected 32 bytes for i32[8]"), std::string::npos)
      << short_labels.error_message();
  EXPECT_EQ(conn_->MemoryInUse(), baseline_);
  response.Clear();
  ASSERT_TRUE(run(32, &response).ok());
  ASSERT_EQ(response.tensors_size(), 2);
  EXPECT_EQ(response.tensors(1).key(), "labels");
  EXPECT_EQ(response.tensors(1).tensor().name(), "step0/labels");
  EXPECT_EQ(response.tensors(1).tensor().shards(3).ranges(0).begin(), 3);
  EXPECT_EQ(conn_->DownloadWhole(response.tensors(0).tensor().id()), Pattern(8 * 4 * 4 * 3 * 4, 1));
  EXPECT_EQ(conn_->DownloadWhole(response.tensors(1).tensor().id()), Pattern(32, 2));
  int64_t deleted = 0;
  EXPECT_EQ(conn_->DeleteMesh(dp, false).error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(conn_->DeleteMesh(dp, true, &deleted).ok());
  EXPECT_EQ(deleted, 2);
}

TEST_F(TensorServiceTest, MeshService) {
  grpc::ClientContext c1, c2, c3, c4;
  pb::CreateMeshRequest request;
  request.set_mesh_id("hybrid-test");
  request.mutable_hybrid()->set_data_parallel_size(2);
  request.mutable_hybrid()->set_model_parallel_size(4);
  pb::CreateMeshResponse created;
  ASSERT_TRUE(conn_->meshes().CreateMesh(&c1, request, &created).ok());
  EXPECT_EQ(created.mesh().device_ids_size(), 8);
  pb::GetMeshRequest get;
  get.set_mesh_id("hybrid-test");
  pb::GetMeshResponse info;
  ASSERT_TRUE(conn_->meshes().GetMesh(&c2, get, &info).ok());
  EXPECT_EQ(info.total_devices(), 8);
  EXPECT_EQ(info.axes().at("data"), 2);
  EXPECT_EQ(info.axes().at("model"), 4);
  EXPECT_EQ(info.mesh().axes(0).name(), "data");
  pb::CreateMeshRequest too_many;
  too_many.mutable_data_parallel()->set_num_devices(16);
  pb::CreateMeshResponse unused;
  grpc::Status s = conn_->meshes().CreateMesh(&c3, too_many, &unused);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(s.error_message(),
            "Not enough devices: mesh requires 16 devices but only 8 available.");
  pb::ListMeshesResponse listed;
  ASSERT_TRUE(conn_->meshes().ListMeshes(&c4, pb::ListMeshesRequest(), &listed).ok());
  EXPECT_EQ(listed.meshes_size(), 2);
  ASSERT_TRUE(conn_->DeleteMesh("hybrid-test", false).ok());
}

TEST(TensorServiceBudgetTest, OverBudgetUploadsFailCleanly) {
  auto daemon =
      // The CPU platform's byte budgets are the subject (a CUDA block is 2 MiB).
      DaemonProcess::Start(
          DaemonOptions{{"--backend=cpu", "--cpu_devices=4", "--cpu_device_memory=1048576"}});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  Conn conn((*daemon)->address());
  pb::TensorInfo info;
  const std::string two_mib = Pattern(2 << 20, 4);
  grpc::Status single = conn.Upload(pb::DTYPE_F32, {512, 1024}, OnDevice(1), two_mib, &info);
  EXPECT_EQ(single.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(single.error_message().find("2097152"), std::string::npos) << single.error_message();
  EXPECT_EQ(conn.MemoryInUse(), 0);
  const std::string r4 = conn.CreateMesh({{"r", 4}});
  EXPECT_EQ(conn.Upload(pb::DTYPE_F32, {512, 1024}, Replicated(r4), two_mib, &info).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(conn.MemoryInUse(), 0);
  ASSERT_TRUE(conn.Upload(pb::DTYPE_F32, {512, 1024}, Sharded(r4, {{"r"}}), two_mib, &info).ok());
  EXPECT_EQ(conn.DownloadWhole(info.id()), two_mib);
  pb::PlaceResponse placed;
  EXPECT_EQ(conn.Place({info.id()}, OnDevice(0), pb::SOURCE_HANDLING_DONATE, &placed).error_code(),
            grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(conn.DownloadWhole(info.id()), two_mib);  // the source is intact
  ASSERT_TRUE(conn.Delete({info.id()}).ok());
  EXPECT_EQ(conn.MemoryInUse(), 0);
}

TEST_F(TensorServiceTest, SixteenConcurrentClients) {
  std::atomic<int> failures{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 16; ++c) {
    clients.emplace_back([&, c] {
      Conn conn(daemon_->address());
      for (int i = 0; i < 6; ++i) {
        const std::vector<int64_t> shape = {8, 64 + 8 * c};
        const std::string data = Pattern(shape[0] * shape[1] * 4, c * 100 + i);
        const pb::PlacementRule rule = (i % 3 == 0)   ? OnDevice(c % 8)
                                       : (i % 3 == 1) ? Sharded(xy_, {{"x"}, {"y"}})
                                                      : Replicated(xy_);
        pb::TensorInfo info;
        grpc::Status s = conn.Upload(pb::DTYPE_F32, shape, rule, data, &info, 777);
        if (!s.ok()) {
          ++failures;
          ADD_FAILURE() << s.error_message();
          continue;
        }
        if (conn.DownloadWhole(info.id()) != data) ++failures;
        if (!conn.Delete({info.id()}).ok()) ++failures;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace placement
