// A client that shrinks a POSIX shm region (--allow_shm_regions) under the
// daemon does not crash it (server/region/unsealed_shm_file.h): before, the
// daemon mapped such memory and its next access past the new end faulted
// (SIGBUS) and killed it for every client. Now uploads from, and downloads
// into, a shrunk region fail FAILED_PRECONDITION naming the sizes -- whether
// the shrink came before the transfer or during it -- the daemon keeps
// serving, and its device memory, descriptors and mappings come back.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/client_impl.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/regions.h"
#include "placement/client/session.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr int64_t kBytes = 16 << 20;

class ShmRegionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto daemon = testing::DaemonProcess::Start(
        {.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--allow_shm_regions",
                         "--device_cache_idle=200ms"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    // Outside any session: the client's own is turned off.
    ClientOptions durable;
    durable.session_policy = SessionPolicy::kNone;
    auto plain = Client::Connect(daemon_->address(), durable);
    ASSERT_TRUE(plain.ok());
    plain_ = *std::move(plain);
    auto session = Session::Open(*plain_, absl::Seconds(30));
    ASSERT_TRUE(session.ok()) << session.status();
    session_ = *std::move(session);
    ClientOptions options;
    options.session_id = session_->id();
    auto scoped = Client::Connect(daemon_->address(), options);
    ASSERT_TRUE(scoped.ok());
    client_ = *std::move(scoped);
    stub_ = pb::TensorService::NewStub(client_->impl().channel);
    name_ = absl::StrCat("/placement-shm-test-", getpid());
    fd_ = shm_open(name_.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fd_, 0);
    ASSERT_EQ(ftruncate(fd_, kBytes), 0);
  }
  void TearDown() override {
    if (fd_ >= 0) close(fd_);
    shm_unlink(name_.c_str());
  }

  // Uploads u8[size] from the region at offset 0 in one slice.
  grpc::Status UploadFrom(const std::string& region, int64_t size) {
    grpc::ClientContext context;
    client_->impl().PrepareContext(&context);
    pb::UploadResponse response;
    auto writer = stub_->Upload(&context, &response);
    pb::UploadRequest message;
    message.mutable_header()->set_dtype(pb::DTYPE_U8);
    message.mutable_header()->add_shape(size);
    bool ok = writer->Write(message);
    message.mutable_region()->set_region_id(region);
    message.mutable_region()->set_size(size);
    if (ok) ok = writer->Write(message);
    if (ok) writer->WritesDone();
    return writer->Finish();
  }

  grpc::Status DownloadInto(const std::string& tensor_id, const std::string& region) {
    grpc::ClientContext context;
    client_->impl().PrepareContext(&context);
    pb::DownloadRequest request;
    request.set_tensor_id(tensor_id);
    request.mutable_destination()->set_region_id(region);
    auto reader = stub_->Download(&context, request);
    pb::DownloadResponse ignored;
    while (reader->Read(&ignored)) {
    }
    return reader->Finish();
  }

  int64_t DeviceBytesInUse() {
    int64_t total = 0;
    // The devices held in a local: a range-for over *StatusOr of a
    // temporary would read the temporary after its end.
    const auto devices = plain_->ListDevices();
    for (const auto& d : devices.value()) total += d.memory_in_use_bytes;
    return total;
  }
  int64_t DeviceBytesCached() {
    int64_t total = 0;
    // The devices held in a local: a range-for over *StatusOr of a
    // temporary would read the temporary after its end.
    const auto devices = plain_->ListDevices();
    for (const auto& d : devices.value()) total += d.memory_cached_bytes;
    return total;
  }

  std::unique_ptr<testing::DaemonProcess> daemon_;
  std::unique_ptr<Client> plain_;
  std::unique_ptr<Session> session_;
  std::unique_ptr<Client> client_;
  std::unique_ptr<pb::TensorService::Stub> stub_;
  std::string name_;
  int fd_ = -1;
};

TEST_F(ShmRegionTest, AShrunkRegionFailsItsTransfersAndTheDaemonKeepsServing) {
  auto region = RegionClient(*client_).RegisterShmName(name_, 0, "shrinking");
  ASSERT_TRUE(region.ok()) << region.status();
  ASSERT_TRUE(UploadFrom(region->id, kBytes).ok());
  // The daemon never maps unsealable memory (it reads it through the fd).
  EXPECT_EQ(testing::LargestMappings(daemon_->pid(), 1 << 20).find(name_), std::string::npos);
  const int64_t fds = testing::OpenFds(daemon_->pid());
  const int64_t mappings = testing::FileMappings(daemon_->pid());
  const int64_t rss = testing::ResidentBytes(daemon_->pid());
  const int64_t in_use = DeviceBytesInUse();

  // Shrunk before the transfer.
  ASSERT_EQ(ftruncate(fd_, 4096), 0);
  grpc::Status upload = UploadFrom(region->id, kBytes);
  EXPECT_EQ(upload.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(upload.error_message(), HasSubstr(absl::StrCat("shm_name '", name_,
                                                             "' shrank to 4096 bytes under the "
                                                             "transfer, which needs")));
  auto small = TensorClient(*plain_).Upload(
      HostArray{DType::kU8, {kBytes}, std::vector<uint8_t>(kBytes, 3)}, Placement::Device(0));
  ASSERT_TRUE(small.ok());
  grpc::Status download = DownloadInto(small->id, region->id);
  EXPECT_EQ(download.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(download.error_message(), HasSubstr("shrank to 4096 bytes"));

  // Shrunk and grown again and again while transfers run: each transfer
  // either completes or fails FAILED_PRECONDITION; none kills the daemon.
  std::atomic<bool> stop{false};
  std::thread shrinker([&] {
    while (!stop.load()) {
      (void)!ftruncate(fd_, 0);
      (void)!ftruncate(fd_, kBytes);
    }
  });
  int failed = 0;
  for (int i = 0; i < 20; ++i) {
    grpc::Status s =
        i % 2 == 0 ? UploadFrom(region->id, kBytes) : DownloadInto(small->id, region->id);
    EXPECT_THAT(s.error_code(), AnyOf(grpc::StatusCode::OK, grpc::StatusCode::FAILED_PRECONDITION))
        << s.error_message();
    failed += s.ok() ? 0 : 1;
  }
  stop = true;
  shrinker.join();
  std::cout << failed << " of 20 transfers met a shrunk region\n";

  // The daemon serves, and what the failures took is back.
  ASSERT_EQ(kill(daemon_->pid(), 0), 0);
  ASSERT_TRUE(TensorClient(*plain_).Delete({small->id}).ok());
  auto listed = TensorClient(*client_).List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::vector<std::string> ids;
  for (const auto& t : *listed) ids.push_back(t.id);
  ASSERT_TRUE(TensorClient(*client_).Delete(ids).ok());
  EXPECT_LE(DeviceBytesInUse(), in_use - kBytes);  // only the first upload's tensor was left
  ASSERT_TRUE(RegionClient(*client_).Unregister(region->id).ok());
  // Freed device blocks are cached for --device_cache_idle, then unmapped:
  // the reclaimer takes them out of the cache's count first and unmaps them
  // (and closes their memory files) a moment later, so the process figures
  // are waited for too (bounded). gRPC may have started a thread or two (a
  // descriptor or two); mappings are counted for memory files only (thread
  // stacks and malloc arenas come and go with gRPC's threads).
  const auto back = [&] {
    return DeviceBytesCached() == 0 && testing::OpenFds(daemon_->pid()) <= fds + 2 &&
           testing::FileMappings(daemon_->pid()) <= mappings &&
           testing::ResidentBytes(daemon_->pid()) <= rss + 2 * kBytes;
  };
  for (int i = 0; i < 600 && !back(); ++i) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(DeviceBytesCached(), 0);
  EXPECT_LE(testing::OpenFds(daemon_->pid()), fds + 2);
  EXPECT_LE(testing::FileMappings(daemon_->pid()), mappings);
  EXPECT_LE(testing::ResidentBytes(daemon_->pid()), rss + 2 * kBytes);
}

TEST_F(ShmRegionTest, ShmNamesOutsideASessionAreRefused) {
  auto region = RegionClient(*plain_).RegisterShmName(name_, 0, "outside");
  EXPECT_EQ(region.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(region.status().message(), HasSubstr("must be registered within a session"));
  EXPECT_EQ(plain_->GetStatus()->num_regions, 0);
}

}  // namespace
}  // namespace placement::client
