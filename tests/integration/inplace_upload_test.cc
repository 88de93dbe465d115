// Uploads written in place (ViewService.ReserveUpload / CommitUpload /
// CancelUpload, docs/api/views.md "Writing in place") against a real daemon,
// through the generated stub and the region socket as any client would:
// sharded and replicated layouts byte-equal to their source after one copy
// into the daemon's memory; a tenant's next reservation of the same size
// gets the same memory file back (what makes a warm upload one warm copy),
// another tenant never does; a cancelled or abandoned reservation
// (its writer killed) frees its memory; bad requests get precise errors; a
// fresh block is handed over with no pages, for its writer to fill.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "client/src/parallel_copy.h"
#include "client/src/region_fd.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/view_service.grpc.pb.h"
#include "tests/integration/view_fixture.h"

namespace placement::client {
namespace {

namespace v1 = ::placement::v1;
using ::testing::HasSubstr;

class InPlaceUploadTest : public ViewTest {
 protected:
  void SetUp() override {
    ViewTest::SetUp();
    stub_ = v1::ViewService::NewStub(
        grpc::CreateChannel(daemon_->address(), grpc::InsecureChannelCredentials()));
    auto status = alice_->GetStatus();
    ASSERT_TRUE(status.ok()) << status.status();
    socket_ = status->region_socket;
  }

  // A context of `client` (its token, and its session if it has one).
  static void Authorize(grpc::ClientContext* context, const std::string& token,
                        const Client* client) {
    context->AddMetadata("authorization", "Bearer " + token);
    if (client != nullptr && !client->session_id().empty()) {
      context->AddMetadata("placement-session", client->session_id());
    }
  }

  absl::StatusOr<v1::ReserveUploadResponse> Reserve(const v1::UploadHeader& header,
                                                    const std::string& token = "alpha-token",
                                                    const Client* client = nullptr) {
    grpc::ClientContext context;
    Authorize(&context, token, client == nullptr ? alice_.get() : client);
    v1::ReserveUploadRequest request;
    *request.mutable_header() = header;
    v1::ReserveUploadResponse response;
    grpc::Status s = stub_->ReserveUpload(&context, request, &response);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return response;
  }
  absl::StatusOr<v1::TensorInfo> Commit(const std::string& id,
                                        const std::string& token = "alpha-token",
                                        const Client* client = nullptr) {
    grpc::ClientContext context;
    Authorize(&context, token, client == nullptr ? alice_.get() : client);
    v1::CommitUploadRequest request;
    request.set_reservation_id(id);
    v1::CommitUploadResponse response;
    grpc::Status s = stub_->CommitUpload(&context, request, &response);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return response.tensor();
  }
  absl::Status Cancel(const std::string& id, const std::string& token = "alpha-token") {
    grpc::ClientContext context;
    Authorize(&context, token, nullptr);
    v1::CancelUploadRequest request;
    request.set_reservation_id(id);
    v1::CancelUploadResponse response;
    grpc::Status s = stub_->CancelUpload(&context, request, &response);
    return s.ok() ? absl::OkStatus()
                  : absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }

  // Writes each slot's box of the row-major u8 array `data` (shape
  // [rows, cols], shards cut along rows) into the redeemed fds.
  void WriteSlots(const v1::ReserveUploadResponse& reserved, const std::vector<int>& fds,
                  const std::vector<uint8_t>& data, int64_t cols) {
    for (const v1::UploadSlot& slot : reserved.slots()) {
      ASSERT_GE(slot.fd_index(), 0);
      const int fd = fds[slot.fd_index()];
      EXPECT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDWR);
      void* map = mmap(nullptr, slot.mapping_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
      const v1::ShardInfo& shard = reserved.tensor().shards(slot.shard_index());
      const int64_t row0 = shard.ranges(0).begin();
      ASSERT_EQ(slot.size_bytes(), (shard.ranges(0).end() - row0) * cols);
      std::memcpy(static_cast<char*>(map) + slot.offset(), data.data() + row0 * cols,
                  slot.size_bytes());
      munmap(map, slot.mapping_bytes());
    }
  }

  // Reserves a u8 tensor of `bytes` as `token` (of `client`) and commits it
  // unwritten; returns its memory file's inode and sets `tensor_id` (0 and
  // unset on failure, which it reports).
  ino_t ReserveAndCommit(int64_t bytes, const std::string& token, const Client* client,
                         std::string* tensor_id) {
    auto reserved = Reserve(Header({bytes}), token, client);
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    if (!reserved.ok()) return 0;
    auto fds = RedeemViewToken(socket_, reserved->fd_token());
    EXPECT_TRUE(fds.ok()) << fds.status();
    if (!fds.ok()) return 0;
    struct stat st {};
    fstat((*fds)[0], &st);
    CloseAll(*fds);
    auto info = Commit(reserved->reservation_id(), token, client);
    EXPECT_TRUE(info.ok()) << info.status();
    if (info.ok()) *tensor_id = info->id();
    return st.st_ino;
  }

  static v1::UploadHeader Header(std::vector<int64_t> shape, const std::string& name = "") {
    v1::UploadHeader header;
    header.set_dtype(v1::DTYPE_U8);
    for (int64_t d : shape) header.add_shape(d);
    header.set_name(name);
    return header;
  }

  static void CloseAll(const std::vector<int>& fds) {
    for (int fd : fds) close(fd);
  }

  std::unique_ptr<v1::ViewService::Stub> stub_;
  std::string socket_;
};

TEST_F(InPlaceUploadTest, ShardedAndReplicatedLayoutsEqualTheirSource) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const int64_t rows = 64, cols = 64 << 10;  // 4 MiB: 1 MiB shards
  const std::vector<uint8_t> data = RandomBytes(rows * cols, 31);
  std::vector<v1::UploadHeader> headers(2, Header({rows, cols}, "inplace/batch"));
  v1::ShardBatchDimRule* sharded = headers[0].mutable_rule()->mutable_shard_batch_dim();
  sharded->set_mesh_id(mesh->id);
  v1::ReplicateRule* replicated = headers[1].mutable_rule()->mutable_replicate();
  replicated->add_device_ids(2);
  replicated->add_device_ids(5);
  for (const v1::UploadHeader& header : headers) {
    SCOPED_TRACE(header.rule().DebugString());
    auto reserved = Reserve(header);
    ASSERT_TRUE(reserved.ok()) << reserved.status();
    EXPECT_THAT(reserved->reservation_id(), ::testing::StartsWith("u-"));
    EXPECT_TRUE(reserved->tensor().id().empty());
    ASSERT_EQ(reserved->slots_size(), reserved->tensor().shards_size());
    auto fds = RedeemViewToken(socket_, reserved->fd_token());
    ASSERT_TRUE(fds.ok()) << fds.status();
    ASSERT_EQ(static_cast<int>(fds->size()), reserved->slots_size());
    WriteSlots(*reserved, *fds, data, cols);
    CloseAll(*fds);
    auto info = Commit(reserved->reservation_id());
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->name(), "inplace/batch");
    EXPECT_EQ(info->tenant(), "team-a");
    auto bytes = TensorClient(*alice_).DownloadBytes(info->id());
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->bytes, data);
    // A token is single-use, and a committed reservation is gone.
    EXPECT_TRUE(absl::IsNotFound(RedeemViewToken(socket_, reserved->fd_token()).status()));
    EXPECT_TRUE(absl::IsNotFound(Commit(reserved->reservation_id()).status()));
    ASSERT_TRUE(TensorClient(*alice_).Delete({info->id()}).ok());
  }
}

// The tenant's freed block comes back to its next reservation of that size
// (the same memory file: a client that kept its mapping writes warm pages),
// and never to another tenant's.
TEST_F(InPlaceUploadTest, ATenantsFreedMemoryReturnsOnlyToThatTenant) {
  const int64_t bytes = 8 << 20;
  auto inode_of = [&](const std::string& token, const Client* client, std::string* tensor_id) {
    return ReserveAndCommit(bytes, token, client, tensor_id);
  };
  std::string first, second, foreign;
  const ino_t a = inode_of("alpha-token", alice_.get(), &first);
  ASSERT_TRUE(TensorClient(*alice_).Delete({first}).ok());
  // Bob's reservation of the same size on the same (default) device: a
  // fresh memory file, not Alice's freed one.
  const ino_t b = inode_of("bravo-token", bob_.get(), &foreign);
  EXPECT_NE(b, a);
  const ino_t a2 = inode_of("alpha-token", alice_.get(), &second);
  EXPECT_EQ(a2, a);
  ASSERT_TRUE(TensorClient(*alice_).Delete({second}).ok());
  ASSERT_TRUE(TensorClient(*bob_).Delete({foreign}).ok());
}

// DaemonService.TrimMemory with a tenant (Client::TrimMemory) frees only
// that tenant's cached blocks: a tenant may trim its own, not another's nor
// everyone's; an admin may name any tenant the daemon has seen.
TEST_F(InPlaceUploadTest, ATenantsTrimFreesOnlyItsOwnCachedMemory) {
  const int64_t bytes = 8 << 20;
  // Reserves, commits and deletes one tensor of `bytes`; returns its memory
  // file's inode (the block then sits in the tenant's cache).
  auto cycle = [&](const std::string& token, const Client* client) -> ino_t {
    std::string id;
    const ino_t inode = ReserveAndCommit(bytes, token, client, &id);
    if (!id.empty()) EXPECT_TRUE(TensorClient(*client).Delete({id}).ok());
    return inode;
  };
  const ino_t alice_block = cycle("alpha-token", alice_.get());
  const ino_t bob_block = cycle("bravo-token", bob_.get());

  auto denied = alice_->TrimMemory("team-b");
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();
  EXPECT_THAT(denied.status().message(),
              HasSubstr("'token:alice' of tenant 'team-a' may trim only that tenant's memory, not "
                        "tenant 'team-b'"));
  denied = alice_->TrimMemory();
  EXPECT_TRUE(absl::IsPermissionDenied(denied.status())) << denied.status();
  EXPECT_THAT(denied.status().message(), HasSubstr("set tenant: \"team-a\""));
  auto unknown = root_->TrimMemory("team-z");
  EXPECT_TRUE(absl::IsNotFound(unknown.status())) << unknown.status();
  EXPECT_THAT(unknown.status().message(), HasSubstr("tenant 'team-z' has never held memory"));

  auto trimmed = alice_->TrimMemory("team-a");
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_GE(trimmed->cache_bytes_released, bytes);
  // Alice's block is gone; Bob's is still cached for Bob.
  EXPECT_NE(cycle("alpha-token", alice_.get()), alice_block);
  EXPECT_EQ(cycle("bravo-token", bob_.get()), bob_block);
  // An admin trims Bob's.
  trimmed = root_->TrimMemory("team-b");
  ASSERT_TRUE(trimmed.ok()) << trimmed.status();
  EXPECT_GE(trimmed->cache_bytes_released, bytes);
  EXPECT_NE(cycle("bravo-token", bob_.get()), bob_block);
}

TEST_F(InPlaceUploadTest, CancelAndAKilledWriterFreeTheMemory) {
  const int64_t bytes = 4 << 20;
  // Cancel.
  auto reserved = Reserve(Header({bytes}));
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  EXPECT_EQ(TotalInUse(), bytes);
  EXPECT_EQ(Metric("placementd_upload_reservations_open"), 1);
  EXPECT_EQ(Metric("placementd_upload_reservation_bytes_open"), bytes);
  // Another tenant: the reservation does not exist.
  EXPECT_TRUE(absl::IsNotFound(Cancel(reserved->reservation_id(), "bravo-token")));
  EXPECT_TRUE(
      absl::IsNotFound(Commit(reserved->reservation_id(), "bravo-token", bob_.get()).status()));
  // Never redeemed: nothing can have been written, so no commit.
  auto early = Commit(reserved->reservation_id());
  EXPECT_TRUE(absl::IsFailedPrecondition(early.status())) << early.status();
  EXPECT_THAT(early.status().message(), HasSubstr("never redeemed"));
  ASSERT_TRUE(Cancel(reserved->reservation_id()).ok());
  EXPECT_EQ(TotalInUse(), 0);
  EXPECT_TRUE(absl::IsNotFound(Cancel(reserved->reservation_id())));

  // A writer killed after redeeming: its exit ends the reservation.
  reserved = Reserve(Header({bytes}));
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  const pid_t child = fork();
  if (child == 0) {
    auto fds = RedeemViewToken(socket_, reserved->fd_token());
    _exit(fds.ok() ? 0 : 1);
  }
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0);
  EXPECT_TRUE(WaitFor([&] { return TotalInUse() == 0; })) << TotalInUse();
  EXPECT_TRUE(absl::IsNotFound(Commit(reserved->reservation_id()).status()));
  EXPECT_GE(Metric("placementd_upload_reservations_ended_total{reason=\"writer_exited\"}"), 1);
  EXPECT_GE(Metric("placementd_upload_reservations_ended_total{reason=\"cancelled\"}"), 1);
  EXPECT_EQ(Metric("placementd_upload_reservations_open"), 0);
}

TEST_F(InPlaceUploadTest, RequestsItCannotServeGetPreciseErrors) {
  // A shard under 256 KiB shares its page slab with other tensors.
  auto small = Reserve(Header({4096}));
  ASSERT_TRUE(absl::IsFailedPrecondition(small.status())) << small.status();
  EXPECT_THAT(small.status().message(), HasSubstr("under 262144 bytes"));
  // A multi-controller part.
  v1::UploadHeader local = Header({1 << 20});
  local.mutable_process_local()->set_global_name("x");
  auto part = Reserve(local);
  ASSERT_TRUE(absl::IsInvalidArgument(part.status())) << part.status();
  EXPECT_THAT(part.status().message(), HasSubstr("header.process_local"));
  // Upload's own checks: a shape with a negative dimension, an unknown mesh.
  auto negative = Reserve(Header({-1}));
  EXPECT_TRUE(absl::IsInvalidArgument(negative.status())) << negative.status();
  v1::UploadHeader unknown = Header({1 << 20});
  unknown.mutable_rule()->mutable_shard_batch_dim()->set_mesh_id("m-nope");
  EXPECT_TRUE(absl::IsNotFound(Reserve(unknown).status()));
  EXPECT_TRUE(absl::IsNotFound(Commit("u-nope").status()));
  EXPECT_EQ(TotalInUse(), 0);
}

}  // namespace
}  // namespace placement::client

namespace placement::client {
namespace {

// Whether the host gives shared memory 4 KiB pages only
// (transparent_hugepage/shmem_enabled "never" or "deny").
bool SharedMemoryHasSmallPagesOnly() {
  std::ifstream file("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string line;
  if (!std::getline(file, line)) return true;  // no transparent huge pages at all
  return line.find("[never]") != std::string::npos || line.find("[deny]") != std::string::npos;
}

// The daemon leaves a fresh memory file of an in-place upload for the
// trainer to fill (it would populate one it writes itself) where shared
// memory has 4 KiB pages: the fd comes with no pages, the writer's
// FillFreshFile brings them in, and the tensor holds its bytes. Freed and
// reserved again, the block comes back whole.
TEST_F(InPlaceUploadTest, AFreshReservationIsLeftForItsWriterToFill) {
  const int64_t bytes = int64_t{64} << 20;  // populated on threads when the daemon writes it
  const std::vector<uint8_t> data = RandomBytes(bytes, 45);
  std::string id;
  ino_t inode = 0;
  {
    auto reserved = Reserve(Header({bytes}));
    ASSERT_TRUE(reserved.ok()) << reserved.status();
    auto fds = RedeemViewToken(socket_, reserved->fd_token());
    ASSERT_TRUE(fds.ok()) << fds.status();
    const v1::UploadSlot& slot = reserved->slots(0);
    const int fd = (*fds)[slot.fd_index()];
    struct stat st {};
    ASSERT_EQ(fstat(fd, &st), 0);
    inode = st.st_ino;
    if (SharedMemoryHasSmallPagesOnly()) {
      EXPECT_EQ(st.st_blocks, 0) << "the daemon allocated pages of a file its writer fills";
    } else {  // it populates in 2 MiB pages, which write(2) would not ask for
      EXPECT_GE(st.st_blocks * 512, bytes);
    }
    void* map = mmap(nullptr, slot.mapping_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ASSERT_NE(map, MAP_FAILED) << std::strerror(errno);
    FillFreshFile(fd, slot.offset(), static_cast<std::byte*>(map) + slot.offset(),
                  reinterpret_cast<const std::byte*>(data.data()), data.size());
    munmap(map, slot.mapping_bytes());
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_GE(st.st_blocks * 512, bytes);
    CloseAll(*fds);
    auto info = Commit(reserved->reservation_id());
    ASSERT_TRUE(info.ok()) << info.status();
    id = info->id();
  }
  auto read = TensorClient(*alice_).DownloadBytes(id);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->bytes == data);
  ASSERT_TRUE(TensorClient(*alice_).Delete({id}).ok());
  auto reserved = Reserve(Header({bytes}));
  ASSERT_TRUE(reserved.ok()) << reserved.status();
  auto fds = RedeemViewToken(socket_, reserved->fd_token());
  ASSERT_TRUE(fds.ok()) << fds.status();
  struct stat st {};
  ASSERT_EQ(fstat((*fds)[0], &st), 0);
  EXPECT_EQ(st.st_ino, inode);
  EXPECT_GE(st.st_blocks * 512, bytes);
  EXPECT_FALSE(FileHasNoPages((*fds)[0]));
  CloseAll(*fds);
  EXPECT_TRUE(Cancel(reserved->reservation_id()).ok());
}

// The C++ client: Upload under kAuto writes same-host arrays of 1 MiB or
// more in place (counted by the daemon), sharded or not (sharded along the
// columns: boxes of many rows, into fresh files), byte-equal on download;
// kInPlace refuses what the daemon cannot write in place.
TEST_F(InPlaceUploadTest, TheClientWritesLargeSameHostUploadsInPlace) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::vector<uint8_t> data = RandomBytes(16 << 20, 41);
  const double before = Metric("placementd_inplace_upload_bytes_total");
  TensorInfo whole = Upload(*alice_, DType::kF32, {1024, 4096}, data);
  TensorInfo sharded =
      Upload(*alice_, DType::kF32, {1024, 4096}, data, Placement::Sharded(*mesh, {{}, {"data"}}));
  EXPECT_EQ(Metric("placementd_inplace_upload_bytes_total"), before + 2 * (16 << 20));
  for (const TensorInfo& info : {whole, sharded}) {
    auto bytes = TensorClient(*alice_).DownloadBytes(info.id);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(bytes->bytes, data);
  }
  // Again after a delete: the block comes back (the same memory file) and
  // the client's mapping of it is reused.
  ASSERT_TRUE(TensorClient(*alice_).Delete({whole.id}).ok());
  const std::vector<uint8_t> next = RandomBytes(16 << 20, 42);
  TensorInfo again = Upload(*alice_, DType::kF32, {1024, 4096}, next);
  auto bytes = TensorClient(*alice_).DownloadBytes(again.id);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(bytes->bytes, next);

  // Small arrays take a region under kAuto; kInPlace refuses them.
  UploadOptions forced;
  forced.path = TransferPath::kInPlace;
  auto small = TensorClient(*alice_).Upload(HostArray{DType::kU8, {4096}, RandomBytes(4096, 43)},
                                            {}, forced);
  EXPECT_TRUE(absl::IsFailedPrecondition(small.status())) << small.status();
  EXPECT_THAT(small.status().message(), HasSubstr("under 262144 bytes"));
  const double after = Metric("placementd_inplace_upload_bytes_total");
  TensorInfo auto_small = Upload(*alice_, DType::kU8, {4096}, RandomBytes(4096, 44));
  EXPECT_FALSE(auto_small.id.empty());
  EXPECT_EQ(Metric("placementd_inplace_upload_bytes_total"), after);
  EXPECT_EQ(Metric("placementd_upload_reservations_open"), 0);
}

}  // namespace
}  // namespace placement::client

namespace placement::client {
namespace {

// ExportShards for_copy (downloads read in place): the tenant's own memory
// handed over read-write and unsealed, so its block stays reusable, where a
// sealed view retires the block for good.
TEST_F(InPlaceUploadTest, ACopyOutExportLeavesTheBlockReusableAndAViewRetiresIt) {
  const int64_t bytes = 8 << 20;
  const std::vector<uint8_t> data = RandomBytes(bytes, 51);
  // Reserves, writes `data`, commits a durable tensor of team-a (no session,
  // so that the admin sees it too); returns its id and inode.
  auto put = [&]() -> std::pair<std::string, ino_t> {
    auto reserved = Reserve(Header({bytes}), "alpha-token", root_.get());
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    if (!reserved.ok()) return {};
    auto fds = RedeemViewToken(socket_, reserved->fd_token());
    EXPECT_TRUE(fds.ok()) << fds.status();
    if (!fds.ok()) return {};
    struct stat st {};
    fstat((*fds)[0], &st);
    WriteSlots(*reserved, *fds, data, 1);
    CloseAll(*fds);
    auto info = Commit(reserved->reservation_id(), "alpha-token", root_.get());
    EXPECT_TRUE(info.ok()) << info.status();
    return {info.ok() ? info->id() : "", st.st_ino};
  };
  auto export_of = [&](const std::string& id, bool for_copy,
                       const std::string& token = "alpha-token") {
    grpc::ClientContext context;
    Authorize(&context, token, token == "alpha-token" ? alice_.get() : nullptr);
    v1::ExportShardsRequest request;
    request.set_tensor_id(id);
    request.set_for_copy(for_copy);
    v1::ExportShardsResponse response;
    EXPECT_TRUE(stub_->ExportShards(&context, request, &response).ok());
    return response;
  };
  const double unsealed = Metric("placementd_view_shards_total{mode=\"unsealed\"}");
  auto [first, inode] = put();
  v1::ExportShardsResponse copy_out = export_of(first, /*for_copy=*/true);
  ASSERT_EQ(copy_out.shards_size(), 1);
  EXPECT_TRUE(copy_out.shards(0).writable());
  EXPECT_EQ(copy_out.shards(0).mapping_bytes(), bytes);
  auto fds = RedeemViewToken(socket_, copy_out.fd_token());
  ASSERT_TRUE(fds.ok()) << fds.status();
  struct stat st {};
  fstat((*fds)[0], &st);
  EXPECT_EQ(st.st_ino, inode);  // the block itself, not a copy
  EXPECT_EQ(fcntl((*fds)[0], F_GETFL) & O_ACCMODE, O_RDWR);
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_SHARED, (*fds)[0], 0);
  ASSERT_NE(map, MAP_FAILED);
  EXPECT_EQ(std::memcmp(map, data.data(), bytes), 0);
  munmap(map, bytes);
  CloseAll(*fds);
  ASSERT_TRUE(Unexport(*alice_, copy_out.export_().export_id()).ok());
  EXPECT_EQ(Metric("placementd_view_shards_total{mode=\"unsealed\"}"), unsealed + 1);
  ASSERT_TRUE(TensorClient(*alice_).Delete({first}).ok());
  // Not sealed, so reused: the next reservation of that size gets it back.
  auto [second, again] = put();
  EXPECT_EQ(again, inode);
  // Another tenant's caller -- the admin, who sees every tenant's tensors --
  // never gets the memory unsealed: its copy-out is a sealed view, and a
  // view retires the block: freed, it never comes back.
  v1::ExportShardsResponse view = export_of(second, /*for_copy=*/true, "root-token");
  ASSERT_EQ(view.shards_size(), 1);
  EXPECT_FALSE(view.shards(0).writable());
  ASSERT_TRUE(Unexport(*root_, view.export_().export_id()).ok());
  ASSERT_TRUE(TensorClient(*alice_).Delete({second}).ok());
  auto [third, fresh] = put();
  EXPECT_NE(fresh, inode);
  ASSERT_TRUE(TensorClient(*alice_).Delete({third}).ok());
}

// The C++ client reads whole same-host downloads of 1 MiB or more in place
// and ends the export; a too-small buffer is the stream's error.
TEST_F(InPlaceUploadTest, TheClientReadsLargeSameHostDownloadsInPlace) {
  auto mesh = MeshClient(*alice_).CreateDataParallel(4, "data");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::vector<uint8_t> data = RandomBytes(16 << 20, 61);
  TensorInfo whole = Upload(*alice_, DType::kF32, {1024, 4096}, data);
  TensorInfo sharded =
      Upload(*alice_, DType::kF32, {1024, 4096}, data, Placement::Sharded(*mesh, {{}, {"data"}}));
  TensorInfo replicated =
      Upload(*alice_, DType::kF32, {1024, 4096}, data, Placement::Replicated(*mesh));
  const double unsealed = Metric("placementd_view_shards_total{mode=\"unsealed\"}");
  for (const TensorInfo& info : {whole, sharded, replicated}) {
    std::vector<uint8_t> back(data.size());
    auto header = TensorClient(*alice_).Download(info.id, absl::MakeSpan(back));
    ASSERT_TRUE(header.ok()) << header.status();
    EXPECT_EQ(header->total_bytes, 16 << 20);
    EXPECT_EQ(header->shape, (std::vector<int64_t>{1024, 4096}));
    EXPECT_TRUE(back == data);
  }
  // One shard for the whole tensor, four for the sharded one, and one of the
  // four replicas (a copy-out exports each box once).
  EXPECT_EQ(Metric("placementd_view_shards_total{mode=\"unsealed\"}"), unsealed + 6);
  EXPECT_EQ(OpenExports(), 0);
  std::vector<uint8_t> small(2 << 20);
  auto refused = TensorClient(*alice_).Download(whole.id, absl::MakeSpan(small));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_THAT(refused.status().message(), HasSubstr("output buffer holds 2097152 bytes"));
  EXPECT_EQ(OpenExports(), 0);
}

}  // namespace
}  // namespace placement::client
