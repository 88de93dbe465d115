// How shard views end, against a real daemon (docs/api/views.md "Lifetime"
// and "Revocation"): a tensor deleted under an open view stays allocated and
// counted until the view closes; an export ended under its reader (Unexport
// by id, the session's end) leaves the reader's mapping showing the shard's
// last bytes -- never the bytes of a tensor another tenant uploads into the
// freed memory -- and frees the memory; a reader killed with views open
// leaves no export, memory or descriptor behind; a token is single-use;
// 1,000 views opened and closed leave the daemon's descriptors and
// mappings where they were.
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/view_service.grpc.pb.h"
#include "tests/integration/view_fixture.h"

namespace placement::client {
namespace {

using ::testing::HasSubstr;

TEST_F(ViewTest, ADeletedTensorStaysCountedUntilItsViewCloses) {
  const std::vector<uint8_t> data = RandomBytes(4 << 20, 21);
  TensorInfo info = Upload(*alice_, DType::kU8, {4 << 20}, data);
  const int64_t with_tensor = TotalInUse();
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  // Delete does not wait and is not refused: the id goes at once ...
  ASSERT_TRUE(TensorClient(*alice_).Delete({info.id}).ok());
  EXPECT_TRUE(absl::IsNotFound(TensorClient(*alice_).Describe(info.id).status()));
  EXPECT_TRUE(absl::IsNotFound(TensorClient(*alice_).View(info.id).status()));
  // ... while the memory stays allocated, counted and readable.
  EXPECT_EQ(TotalInUse(), with_tensor);
  EXPECT_EQ(Bytes((*view)->bytes(0)), data);
  ASSERT_TRUE((*view)->Close().ok());
  EXPECT_EQ(MemoryInUse(), baseline_);
}

TEST_F(ViewTest, AnEndedExportNeverShowsAnotherTenantsBytes) {
  const std::vector<uint8_t> data = RandomBytes(1 << 20, 22);
  TensorInfo info = Upload(*alice_, DType::kU8, {1 << 20}, data, Placement::Device(3));
  auto view = TensorClient(*alice_).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  // The tensor's owner ends the export by id and deletes the tensor: the
  // daemon lets the memory go ...
  ASSERT_TRUE(Unexport(*alice_, (*view)->export_id()).ok());
  ASSERT_TRUE(TensorClient(*alice_).Delete({info.id}).ok());
  EXPECT_EQ(MemoryInUse(), baseline_);
  // ... and tenant B fills same-sized tensors on the same device, where a
  // reused block would land.
  std::vector<std::string> theirs;
  for (int i = 0; i < 4; ++i) {
    theirs.push_back(
        Upload(*bob_, DType::kU8, {1 << 20}, RandomBytes(1 << 20, 500 + i), Placement::Device(3))
            .id);
  }
  // The reader that kept its mapping still reads the shard's last bytes.
  EXPECT_EQ(Bytes((*view)->bytes(0)), data);
  EXPECT_TRUE(absl::IsNotFound((*view)->Close()));  // already ended
  ASSERT_TRUE(TensorClient(*bob_).Delete(theirs).ok());
}

TEST_F(ViewTest, ASessionsEndEndsItsExports) {
  auto owner = Connect("alpha-token", SessionPolicy::kNone);
  auto own = Session::Open(*owner, absl::Seconds(30));
  ASSERT_TRUE(own.ok()) << own.status();
  auto in_session = Connect("alpha-token", SessionPolicy::kNone, (*own)->id());
  const std::vector<uint8_t> data = RandomBytes(2 << 20, 23);
  TensorInfo info = Upload(*in_session, DType::kU8, {2 << 20}, data);
  auto view = TensorClient(*in_session).View(info.id);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ(ListExports(*in_session)->exports[0].session_id, (*own)->id());
  ASSERT_TRUE((*own)->Close().ok());
  // The session took its tensor and its export: memory back, nothing open.
  EXPECT_TRUE(WaitFor([&] { return OpenExports() == 0 && MemoryInUse() == baseline_; }));
  EXPECT_EQ(MemoryInUse(), baseline_);
  EXPECT_EQ(Bytes((*view)->bytes(0)), data);  // the reader's mapping is its own
  EXPECT_TRUE(absl::IsNotFound((*view)->Close()));
  EXPECT_GE(Metric("placementd_exports_ended_total{reason=\"session\"}"), 1);
}

// ExportShards for `client`'s tensor by hand; the token and the socket.
struct RawExport {
  std::string id;
  std::string token;
};
RawExport ExportByHand(const std::string& address, const Client& client, const std::string& token,
                       const std::string& tensor_id) {
  grpc::ClientContext context;
  context.AddMetadata("authorization", "Bearer " + token);
  if (!client.session_id().empty()) context.AddMetadata("placement-session", client.session_id());
  placement::v1::ExportShardsRequest request;
  request.set_tensor_id(tensor_id);
  placement::v1::ExportShardsResponse response;
  grpc::Status status = placement::v1::ViewService::NewStub(
                            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))
                            ->ExportShards(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return {response.export_().export_id(), response.fd_token()};
}

TEST_F(ViewTest, AKilledReaderLeavesNothingBehind) {
  const std::string socket = alice_->GetStatus()->region_socket;
  const std::vector<uint8_t> data = RandomBytes(8 << 20, 24);
  auto mesh = MeshClient(*alice_).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok());
  TensorInfo info =
      Upload(*alice_, DType::kU8, {8 << 20}, data, Placement::Sharded(*mesh, {{"data"}}));
  TensorInfo small = Upload(*alice_, DType::kU8, {4096}, RandomBytes(4096, 25));
  const int64_t fds = testing::OpenFds(daemon_->pid());
  const int64_t in_use = TotalInUse();
  // Three exports, taken by a child process that maps them and is killed.
  std::vector<RawExport> exports;
  for (const std::string& id : {info.id, info.id, small.id}) {
    exports.push_back(ExportByHand(daemon_->address(), *alice_, "alpha-token", id));
  }
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    for (const RawExport& e : exports) {
      absl::StatusOr<std::vector<int>> got = RedeemViewToken(socket, e.token);
      if (!got.ok()) _exit(2);
      for (int fd : *got) {
        if (mmap(nullptr, 2 << 20, PROT_READ, MAP_SHARED, fd, 0) == MAP_FAILED) _exit(3);
      }
    }
    (void)write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);
  auto list = ListExports(*alice_);
  ASSERT_EQ(list->exports.size(), 3u);
  for (const ExportInfo& e : list->exports) EXPECT_EQ(e.reader_pid, child);
  ASSERT_TRUE(TensorClient(*alice_).Delete({info.id, small.id}).ok());
  // Held for the reader; the small tensor's export is a private copy in a
  // 256 KiB block of its own, charged while it lasts.
  EXPECT_EQ(TotalInUse(), in_use + (256 << 10));
  kill(child, SIGKILL);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  // The export leaves the list, then releases what it held (a moment later).
  EXPECT_TRUE(WaitFor([&] { return OpenExports() == 0 && MemoryInUse() == baseline_; }))
      << OpenExports() << " exports open";
  EXPECT_EQ(MemoryInUse(), baseline_);
  EXPECT_TRUE(WaitFor([&] { return testing::OpenFds(daemon_->pid()) <= fds; }))
      << testing::OpenFds(daemon_->pid()) << " fds, " << fds << " before";
  EXPECT_GE(Metric("placementd_exports_ended_total{reason=\"process_exit\"}"), 3);
}

TEST_F(ViewTest, ThousandViewsOpenedAndClosedLeaveNoGrowth) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(2, "data");
  ASSERT_TRUE(mesh.ok());
  const std::vector<uint8_t> data = RandomBytes(1 << 20, 26);
  TensorInfo large =
      Upload(*alice_, DType::kU8, {1 << 20}, data, Placement::Sharded(*mesh, {{"data"}}));
  TensorInfo small = Upload(*alice_, DType::kU8, {100}, RandomBytes(100, 27));
  TensorClient tensors(*alice_);
  // Warm: the first views create the client's and daemon's lazy state.
  for (int i = 0; i < 10; ++i) ASSERT_TRUE(tensors.View(i % 2 ? small.id : large.id).ok());
  const int64_t fds = testing::OpenFds(daemon_->pid());
  const int64_t maps = testing::Mappings(daemon_->pid());
  const int64_t in_use = TotalInUse();
  const double before = Metric("placementd_views_exported_total");
  for (int i = 0; i < 1000; ++i) {
    auto view = tensors.View(i % 2 ? small.id : large.id);
    ASSERT_TRUE(view.ok()) << i << ": " << view.status();
    ASSERT_EQ((*view)->bytes(0).size(), i % 2 ? 100u : 512u << 10);
    ASSERT_TRUE((*view)->Close().ok());
  }
  EXPECT_EQ(Metric("placementd_views_exported_total"), before + 1000);
  EXPECT_EQ(OpenExports(), 0);
  EXPECT_EQ(TotalInUse(), in_use);
  // No growth with the views (a leak would be 1,000 fds or mappings); gRPC
  // may start a thread (two mappings) or open a descriptor under load, and
  // an ASan daemon's allocator maps a region as a thread first allocates
  // (763 against 758 once, in CI's sanitizer set running two at a time).
  EXPECT_TRUE(WaitFor([&] {
    return testing::OpenFds(daemon_->pid()) <= fds + 2 &&
           testing::Mappings(daemon_->pid()) <= maps + 8;
  })) << testing::OpenFds(daemon_->pid())
      << " fds (" << fds << " before), " << testing::Mappings(daemon_->pid()) << " mappings ("
      << maps << " before)";
}

TEST_F(ViewTest, ATokenIsSingleUse) {
  const std::string socket = alice_->GetStatus()->region_socket;
  TensorInfo info = Upload(*alice_, DType::kU8, {1 << 20}, RandomBytes(1 << 20, 28));
  RawExport e = ExportByHand(daemon_->address(), *alice_, "alpha-token", info.id);
  auto first = RedeemViewToken(socket, e.token);
  ASSERT_TRUE(first.ok()) << first.status();
  for (int fd : *first) close(fd);
  auto again = RedeemViewToken(socket, e.token);
  EXPECT_TRUE(absl::IsNotFound(again.status())) << again.status();
  EXPECT_THAT(again.status().message(), HasSubstr("already redeemed"));
  auto bogus = RedeemViewToken(socket, "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(absl::IsNotFound(bogus.status()));
  EXPECT_TRUE(Unexport(*alice_, e.id).ok());
  EXPECT_TRUE(absl::IsNotFound(Unexport(*alice_, e.id)));
}

}  // namespace
}  // namespace placement::client
