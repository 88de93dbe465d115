// Who owns a shared-memory region, against a real daemon with --auth_file:
// another tenant's region and another session's region are NOT_FOUND on
// every use; a session's regions are unmapped when it closes; a client
// killed with SIGKILL while holding a region in a session leaves nothing
// mapped in the daemon once its lease runs out; the daemon's stop unmaps
// what is left.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/client_impl.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/regions.h"
#include "placement/client/tensors.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/auth_tokens.h"
#include "tests/testing/daemon_process.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr char kChildEnv[] = "PLACEMENT_REGION_TEST_CHILD";

using testing::Sha256Hex;

// Whether process `pid` maps a memfd named `name`.
bool Maps(pid_t pid, const std::string& name) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:" + name) != std::string::npos) return true;
  }
  return false;
}

std::unique_ptr<Client> ConnectAs(const std::string& address, const std::string& token,
                                  const std::string& session = "") {
  ClientOptions options;
  options.token = token;
  options.session_id = session;
  auto client = Client::Connect(address, options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

absl::StatusOr<std::string> OpenSession(const Client& client, int ttl_seconds) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::OpenSessionRequest request;
  request.mutable_ttl()->set_seconds(ttl_seconds);
  pb::OpenSessionResponse response;
  grpc::Status status =
      pb::SessionService::NewStub(client.impl().channel)->OpenSession(&context, request, &response);
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
  }
  return response.session().id();
}

// Uploads u8[size] from `region_id` at 0 as `client`; the status.
grpc::Status UploadFrom(const Client& client, const std::string& region_id, int64_t size) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::UploadResponse response;
  auto writer = pb::TensorService::NewStub(client.impl().channel)->Upload(&context, &response);
  pb::UploadRequest message;
  message.mutable_header()->set_dtype(pb::DTYPE_U8);
  message.mutable_header()->add_shape(size);
  writer->Write(message);
  message.mutable_region()->set_region_id(region_id);
  message.mutable_region()->set_size(size);
  writer->Write(message);
  writer->WritesDone();
  return writer->Finish();
}

class RegionOwnershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string creds = dir_.path() + "/creds";
    std::ofstream(creds) << "token sha256:" << Sha256Hex("alpha-token") << " team-a user alice\n"
                         << "token sha256:" << Sha256Hex("bravo-token") << " team-b user bob\n"
                         << "token sha256:" << Sha256Hex("root-token") << " ops admin root\n";
    auto daemon = DaemonProcess::Start(
        {.extra_flags = {"--auth_file=" + creds, "--backend=cpu", "--cpu_devices=2",
                         "--session_sweep_interval=100ms"}});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = std::move(*daemon);
  }

  TempDir dir_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(RegionOwnershipTest, AnotherTenantsRegionIsNotFoundEverywhere) {
  auto alice = ConnectAs(daemon_->address(), "alpha-token");
  auto bob = ConnectAs(daemon_->address(), "bravo-token");
  auto root = ConnectAs(daemon_->address(), "root-token");
  ASSERT_TRUE(alice && bob && root);
  auto region = SharedRegion::Create(*alice, 1 << 16, "alice-region");
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->info().tenant, "team-a");
  const std::string id = (*region)->id();

  EXPECT_TRUE(UploadFrom(*alice, id, 4096).ok());
  grpc::Status stolen = UploadFrom(*bob, id, 4096);
  EXPECT_EQ(stolen.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(stolen.error_message(), HasSubstr(absl::StrCat("region.region_id '", id, "'")));
  EXPECT_THAT(*RegionClient(*bob).List(), ::testing::IsEmpty());
  EXPECT_EQ(RegionClient(*bob).Unregister(id).code(), absl::StatusCode::kNotFound);
  // Bob's download cannot write into Alice's memory either.
  std::vector<uint8_t> bytes(4096, 5);
  auto bobs = TensorClient(*bob).Upload(HostArray{DType::kU8, {4096}, bytes});
  ASSERT_TRUE(bobs.ok());
  pb::DownloadRequest request;
  request.set_tensor_id(bobs->id);
  request.mutable_destination()->set_region_id(id);
  grpc::ClientContext context;
  bob->impl().PrepareContext(&context);
  auto reader = pb::TensorService::NewStub(bob->impl().channel)->Download(&context, request);
  pb::DownloadResponse ignored;
  while (reader->Read(&ignored)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ((*region)->data()[0], 0);

  auto everything = RegionClient(*root).List();
  ASSERT_TRUE(everything.ok());
  ASSERT_EQ(everything->size(), 1u);
  EXPECT_EQ((*everything)[0].tenant, "team-a");
  EXPECT_TRUE(Maps(daemon_->pid(), "alice-region"));
  region->reset();  // unregisters
  EXPECT_FALSE(Maps(daemon_->pid(), "alice-region"));
}

TEST_F(RegionOwnershipTest, ASessionsRegionIsItsOwnAndGoesWithIt) {
  auto alice = ConnectAs(daemon_->address(), "alpha-token");
  ASSERT_NE(alice, nullptr);
  auto session = OpenSession(*alice, 60);
  ASSERT_TRUE(session.ok()) << session.status();
  auto other_session = OpenSession(*alice, 60);
  ASSERT_TRUE(other_session.ok());
  auto in_session = ConnectAs(daemon_->address(), "alpha-token", *session);
  auto in_other = ConnectAs(daemon_->address(), "alpha-token", *other_session);
  ASSERT_TRUE(in_session && in_other);
  auto region = SharedRegion::Create(*in_session, 1 << 16, "session-region");
  ASSERT_TRUE(region.ok()) << region.status();
  EXPECT_EQ((*region)->info().session_id, *session);
  const std::string id = (*region)->id();

  EXPECT_TRUE(UploadFrom(*in_session, id, 1024).ok());
  EXPECT_EQ(UploadFrom(*alice, id, 1024).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(UploadFrom(*in_other, id, 1024).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(Maps(daemon_->pid(), "session-region"));

  grpc::ClientContext context;
  alice->impl().PrepareContext(&context);
  pb::CloseSessionRequest close;
  close.set_session_id(*session);
  pb::CloseSessionResponse closed;
  ASSERT_TRUE(pb::SessionService::NewStub(alice->impl().channel)
                  ->CloseSession(&context, close, &closed)
                  .ok());
  // Closing ended the region with the session's tensors.
  EXPECT_FALSE(Maps(daemon_->pid(), "session-region"));
  EXPECT_EQ(alice->GetStatus()->num_regions, 0);
  EXPECT_EQ(UploadFrom(*in_other, id, 1024).error_code(), grpc::StatusCode::NOT_FOUND);
  // Its owner's later Unregister finds nothing to do.
  EXPECT_EQ((*region)->Unregister().code(), absl::StatusCode::kNotFound);
}

TEST_F(RegionOwnershipTest, StoppingTheDaemonUnmapsEveryRegion) {
  auto alice = ConnectAs(daemon_->address(), "alpha-token");
  ASSERT_NE(alice, nullptr);
  auto region = SharedRegion::Create(*alice, 1 << 16, "stop-region");
  ASSERT_TRUE(region.ok());
  EXPECT_TRUE(Maps(daemon_->pid(), "stop-region"));
  EXPECT_EQ(daemon_->Stop(SIGTERM), 0);
  (*region)->Unregister().IgnoreError();  // the daemon is gone: UNAVAILABLE
}

// The child side of KilledClientsRegionIsUnmappedAfterItsLease: opens a
// session with a 2 s lease, registers a 1 MiB region in it, writes the
// region id to the file named by the environment, keeps renewing until
// killed.
TEST(RegionChild, HoldsARegionUntilKilled) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) GTEST_SKIP() << "runs only as the child of RegionOwnershipTest";
  const std::string text(spec);
  const size_t comma = text.find(',');
  auto plain = ConnectAs(text.substr(0, comma), "alpha-token");
  ASSERT_NE(plain, nullptr);
  auto session = OpenSession(*plain, 2);
  ASSERT_TRUE(session.ok()) << session.status();
  auto client = ConnectAs(text.substr(0, comma), "alpha-token", *session);
  auto region = SharedRegion::Create(*client, 1 << 20, "killed-client");
  ASSERT_TRUE(region.ok()) << region.status();
  std::memset((*region)->data(), 1, 1 << 20);
  const std::string ready = text.substr(comma + 1);
  std::ofstream(ready + ".tmp") << (*region)->id() << "\n";
  std::rename((ready + ".tmp").c_str(), ready.c_str());
  for (;;) {
    grpc::ClientContext context;
    plain->impl().PrepareContext(&context);
    pb::RenewSessionRequest request;
    request.set_session_id(*session);
    pb::RenewSessionResponse response;
    (void)pb::SessionService::NewStub(plain->impl().channel)
        ->RenewSession(&context, request, &response);
    absl::SleepFor(absl::Milliseconds(200));
  }
}

TEST_F(RegionOwnershipTest, KilledClientsRegionIsUnmappedAfterItsLease) {
  auto root = ConnectAs(daemon_->address(), "root-token");
  ASSERT_NE(root, nullptr);
  const std::string ready = dir_.path() + "/child_ready";
  std::vector<std::string> env_strings = {
      absl::StrCat(kChildEnv, "=", daemon_->address(), ",", ready)};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "region_ownership_test";
  std::string filter = "--gtest_filter=RegionChild.*";
  char* argv[] = {arg0.data(), filter.data(), nullptr};
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  const std::string region_id = testing::WaitForFileLine(ready, absl::Seconds(60));
  ASSERT_FALSE(region_id.empty()) << "the child never registered its region";
  EXPECT_TRUE(Maps(daemon_->pid(), "killed-client"));
  EXPECT_EQ(root->GetStatus()->num_regions, 1);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  // The lease (2 s) runs out and the next sweep (100 ms) unmaps the region;
  // waiting is bounded far above that.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (Maps(daemon_->pid(), "killed-client") && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_FALSE(Maps(daemon_->pid(), "killed-client"));
  EXPECT_EQ(root->GetStatus()->num_regions, 0);
  EXPECT_THAT(*RegionClient(*root).List(), ::testing::IsEmpty());
}

}  // namespace
}  // namespace placement::client
