// Shard views against a real daemon (docs/api/views.md): every dtype,
// sharded and replicated, small shards (private copies) and large ones (in
// place), byte-equal to Download; views read while another tenant uploads
// and deletes (no stray bytes); another tenant's or session's tensor and
// export are NOT_FOUND; the memory a reader gets is read-only through every
// door (mmap, mprotect, a read-write re-open, write, truncate, hole punch),
// and a write faults in the writing process while the daemon serves on; the
// metrics count the views (`placectl top` showing them: test_views.py).
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "absl/strings/str_replace.h"
#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/view_service.grpc.pb.h"
#include "tests/integration/view_fixture.h"

namespace placement::client {
namespace {

using ::testing::HasSubstr;

struct DTypeCase {
  DType dtype;
  int64_t element;
};

const DTypeCase kDTypes[] = {
    {DType::kF32, 4}, {DType::kF64, 8}, {DType::kF16, 2}, {DType::kBF16, 2}, {DType::kI8, 1},
    {DType::kI16, 2}, {DType::kI32, 4}, {DType::kI64, 8}, {DType::kU8, 1},   {DType::kBool, 1}};

// Every viewed shard equals Download of its device, and CopyTo the whole
// array.
void ExpectViewMatchesDownload(const Client& client, const TensorInfo& info,
                               const std::vector<uint8_t>& data) {
  TensorClient tensors(client);
  auto view = tensors.View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  ASSERT_EQ((*view)->shards().size(), info.shards.size());
  for (const TensorView::Shard& shard : (*view)->shards()) {
    auto expected = tensors.DownloadBytes(info.id, DownloadSelection::Device(shard.info.device_id));
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_EQ(Bytes(shard.bytes), expected->bytes) << "shard " << shard.index;
    EXPECT_EQ(shard.copied, shard.info.size_bytes < (256 << 10)) << shard.info.size_bytes;
  }
  std::vector<std::byte> whole(data.size());
  ASSERT_TRUE((*view)->CopyTo(whole).ok());
  EXPECT_EQ(Bytes(whole), data);
  EXPECT_TRUE((*view)->Close().ok());
}

TEST_F(ViewTest, EveryDtypeShardedAndReplicatedIsByteEqualToDownload) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto pair = MeshClient(*alice_).CreateDataParallel(2, "data");
  ASSERT_TRUE(pair.ok()) << pair.status();
  uint32_t seed = 1;
  for (const DTypeCase& c : kDTypes) {
    // 8 x 24 elements: shards of a few hundred bytes (private copies); 1 MiB:
    // 256 KiB shards and 1 MiB replicas, in place.
    for (bool large : {false, true}) {
      const std::vector<int64_t> shape = {large ? 512 : 8, large ? 2048 / c.element : 24};
      const std::vector<uint8_t> data = RandomBytes(
          static_cast<size_t>(shape[0] * shape[1] * c.element), seed++, c.dtype == DType::kBool);
      SCOPED_TRACE(DescribeArray(c.dtype, shape));
      TensorInfo sharded =
          Upload(*alice_, c.dtype, shape, data, Placement::Sharded(*mesh, {{"data"}}));
      ExpectViewMatchesDownload(*alice_, sharded, data);
      TensorInfo replicated = Upload(*alice_, c.dtype, shape, data, Placement::Replicated(*pair));
      ExpectViewMatchesDownload(*alice_, replicated, data);
      ASSERT_TRUE(TensorClient(*alice_).Delete({sharded.id, replicated.id}).ok());
    }
  }
  // A selection of shards, and a bad one.
  const std::vector<uint8_t> data = RandomBytes(64 * 1024 * 4, 99);
  TensorInfo info =
      Upload(*alice_, DType::kF32, {64, 1024}, data, Placement::Sharded(*mesh, {{"data"}}));
  auto two = TensorClient(*alice_).View(info.id, {.shard_indices = {3, 1}});
  ASSERT_TRUE(two.ok()) << two.status();
  ASSERT_EQ((*two)->shards().size(), 2u);
  EXPECT_EQ((*two)->shards()[0].index, 3);
  EXPECT_EQ(Bytes((*two)->bytes(0)),
            std::vector<uint8_t>(data.begin() + 3 * data.size() / 4, data.end()));
  std::vector<std::byte> whole(data.size());
  EXPECT_TRUE(absl::IsFailedPrecondition((*two)->CopyTo(whole)));
  auto bad = TensorClient(*alice_).View(info.id, {.shard_indices = {4}});
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(bad.status().message(), HasSubstr("shard_indices[0] = 4 is out of range"));
  auto twice = TensorClient(*alice_).View(info.id, {.shard_indices = {1, 1}});
  EXPECT_THAT(twice.status().message(), HasSubstr("shard_indices[1] = 1 is repeated"));
}

TEST_F(ViewTest, AViewReadsItsBytesWhileAnotherTenantUploadsAndDeletes) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(2, "data");
  ASSERT_TRUE(mesh.ok());
  const std::vector<uint8_t> data = RandomBytes(2 << 20, 7);
  TensorInfo info =
      Upload(*alice_, DType::kU8, {2 << 20}, data, Placement::Sharded(*mesh, {{"data"}}));
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    // Same sizes as the viewed shards: the blocks a cache would hand out.
    for (int i = 0; i < 40 && !stop; ++i) {
      TensorInfo other = Upload(*bob_, DType::kU8, {1 << 20}, RandomBytes(1 << 20, 100 + i),
                                Placement::Device(i % 2));
      ASSERT_TRUE(TensorClient(*bob_).Delete({other.id}).ok());
    }
  });
  std::vector<std::byte> whole(data.size());
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE((*view)->CopyTo(whole).ok());
    ASSERT_EQ(Bytes(whole), data) << "read " << i;
  }
  stop = true;
  churn.join();
}

TEST_F(ViewTest, AnotherTenantsOrSessionsTensorAndExportAreNotFound) {
  TensorInfo info = Upload(*alice_, DType::kF32, {1 << 16}, RandomBytes(1 << 18, 3));
  // Tenant B: exactly the answer for an id that never existed.
  auto foreign = TensorClient(*bob_).View(info.id);
  auto unknown = TensorClient(*bob_).View("t-00000000000000000000000000000000");
  ASSERT_TRUE(absl::IsNotFound(foreign.status())) << foreign.status();
  EXPECT_EQ(foreign.status().message(),
            absl::StrReplaceAll(unknown.status().message(),
                                {{"t-00000000000000000000000000000000", info.id}}));
  // Another session of the same tenant: the tensor is its session's.
  auto other_session = Connect("alpha-token");
  auto cross = TensorClient(*other_session).View(info.id);
  ASSERT_TRUE(absl::IsNotFound(cross.status())) << cross.status();
  EXPECT_THAT(cross.status().message(), HasSubstr(alice_->session_id()));
  // Alice's export: tenant B and the other session see none of it.
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  const std::string id = (*view)->export_id();
  EXPECT_TRUE(absl::IsNotFound(Unexport(*bob_, id)));
  EXPECT_TRUE(absl::IsNotFound(Unexport(*other_session, id)));
  EXPECT_TRUE(ListExports(*bob_)->exports.empty());
  EXPECT_TRUE(ListExports(*other_session)->exports.empty());
  auto mine = ListExports(*alice_);
  ASSERT_EQ(mine->exports.size(), 1u);
  EXPECT_EQ(mine->exports[0].id, id);
  EXPECT_EQ(mine->exports[0].reader_pid, getpid());
  EXPECT_EQ(mine->exports[0].size_bytes, 1 << 18);
  EXPECT_EQ(ListExports(*root_)->exports.size(), 1u);  // the admin sees all
  EXPECT_EQ(ListExports(*bob_)->exports_total, 0);
  EXPECT_GE(mine->exports_total, 1);
}

TEST_F(ViewTest, TheMemoryIsReadOnlyAndAWriteFaultsInTheWriter) {
  const std::vector<uint8_t> data = RandomBytes(1 << 20, 11);
  TensorInfo info = Upload(*alice_, DType::kU8, {1 << 20}, data);
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  auto* bytes = const_cast<std::byte*>((*view)->bytes(0).data());
  // The mapping cannot be made writable either.
  EXPECT_EQ(mprotect(bytes, 1 << 20, PROT_READ | PROT_WRITE), -1);
  EXPECT_EQ(errno, EACCES);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    signal(SIGSEGV, SIG_DFL);  // the kernel's verdict, also under a sanitizer's handler
    bytes[0] = std::byte{1};   // must fault: the mapping is PROT_READ
    _exit(0);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << wstatus;
  EXPECT_EQ(WTERMSIG(wstatus), SIGSEGV);
  EXPECT_EQ(Bytes((*view)->bytes(0)), data);
  auto download = TensorClient(*alice_).DownloadBytes(info.id);
  ASSERT_TRUE(download.ok()) << download.status();  // the daemon serves on
  EXPECT_EQ(download->bytes, data);
}

TEST_F(ViewTest, AReaderCannotWriteThroughAnyDescriptorItGets) {
  const std::vector<uint8_t> data = RandomBytes(1 << 20, 12);
  TensorInfo info = Upload(*alice_, DType::kU8, {1 << 20}, data);
  auto status = alice_->GetStatus();
  ASSERT_TRUE(status.ok());
  ExportList before = *ListExports(*alice_);
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok());
  // A second export by hand, keeping the fd a reader receives:
  // TensorView::Open's steps without the mapping.
  auto raw = [&]() -> absl::StatusOr<std::vector<int>> {
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer alpha-token");
    context.AddMetadata("placement-session", alice_->session_id());
    placement::v1::ExportShardsRequest request;
    request.set_tensor_id(info.id);
    placement::v1::ExportShardsResponse response;
    auto stub = placement::v1::ViewService::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
    grpc::Status s = stub->ExportShards(&context, request, &response);
    if (!s.ok()) return absl::InternalError(s.error_message());
    return RedeemViewToken(status->region_socket, response.fd_token());
  }();
  ASSERT_TRUE(raw.ok()) << raw.status();
  ASSERT_EQ(raw->size(), 1u);
  const int fd = (*raw)[0];
  EXPECT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(write(fd, "x", 1), -1);
  EXPECT_EQ(ftruncate(fd, 0), -1);
  // Re-opened read-write through /proc (the memory file's mode allows it):
  // the seals still refuse every write.
  const int rw = open(absl::StrCat("/proc/self/fd/", fd).c_str(), O_RDWR | O_CLOEXEC);
  if (rw >= 0) {
    EXPECT_EQ(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0), MAP_FAILED);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(pwrite(rw, "x", 1, 0), -1);
    EXPECT_EQ(errno, EPERM);
    EXPECT_EQ(ftruncate(rw, 4096), -1);
    EXPECT_EQ(fallocate(rw, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), -1);
    EXPECT_EQ(fcntl(rw, F_ADD_SEALS, F_SEAL_WRITE), -1);  // sealed against new seals too
    close(rw);
  }
  void* ro = mmap(nullptr, 1 << 20, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(ro, MAP_FAILED);
  EXPECT_EQ(std::memcmp(ro, data.data(), data.size()), 0);
  munmap(ro, 1 << 20);
  close(fd);
  // That export is the daemon's until its reader (this process) goes or it
  // is unexported.
  auto after = ListExports(*alice_);
  ASSERT_EQ(after->exports.size(), before.exports.size() + 2);
  for (const ExportInfo& e : after->exports) {
    if (e.id != (*view)->export_id()) EXPECT_TRUE(Unexport(*alice_, e.id).ok());
  }
}

TEST_F(ViewTest, MetricsCountTheViews) {
  TensorInfo info = Upload(*alice_, DType::kF32, {1 << 18}, RandomBytes(1 << 20, 5));
  const double exported = Metric("placementd_views_exported_total");
  const double bytes = Metric("placementd_view_bytes_total");
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  const std::string text = Metrics();
  EXPECT_EQ(testing::MetricValue(text, "placementd_views_exported_total"), exported + 1);
  EXPECT_EQ(testing::MetricValue(text, "placementd_view_bytes_total"), bytes + (1 << 20));
  EXPECT_EQ(testing::MetricValue(text, "placementd_exports_open"), 1);
  EXPECT_EQ(testing::MetricValue(text, "placementd_export_bytes_open"), 1 << 20);
  EXPECT_GE(testing::MetricValue(text, "placementd_view_shards_total{mode=\"in_place\"}"), 1);
  ASSERT_TRUE((*view)->Close().ok());
  EXPECT_EQ(Metric("placementd_exports_open"), 0);
  EXPECT_EQ(Metric("placementd_exports_ended_total{reason=\"unexport\"}") >= 1, true);
}

}  // namespace
}  // namespace placement::client
