// Sessions with leases against a real daemon: tensors created by calls that
// join a session are freed when it closes or its lease runs out -- here after
// the client process is killed with SIGKILL -- while durable and persisted
// tensors stay; sessions are per tenant; GetStatus counts them; a long
// session does not remember the results it made and deleted.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;
using ::testing::HasSubstr;
using testing::TempDir;

constexpr char kChildEnv[] = "PLACEMENT_SESSION_TEST_CHILD";

class Calls {
 public:
  explicit Calls(const std::string& address)
      : channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
        sessions_(pb::SessionService::NewStub(channel_)),
        tensors_(pb::TensorService::NewStub(channel_)),
        devices_(pb::DeviceService::NewStub(channel_)),
        daemon_(pb::DaemonService::NewStub(channel_)) {}

  void Prepare(grpc::ClientContext* context, const std::string& session = "") const {
    if (!session.empty()) context->AddMetadata("placement-session", session);
    context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  }

  absl::StatusOr<pb::SessionInfo> Open(int ttl_seconds) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::OpenSessionRequest request;
    request.mutable_ttl()->set_seconds(ttl_seconds);
    pb::OpenSessionResponse response;
    grpc::Status s = sessions_->OpenSession(&context, request, &response);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return response.session();
  }
  grpc::Status Renew(const std::string& id) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::RenewSessionRequest request;
    request.set_session_id(id);
    pb::RenewSessionResponse response;
    return sessions_->RenewSession(&context, request, &response);
  }
  absl::StatusOr<int64_t> Close(const std::string& id) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::CloseSessionRequest request;
    request.set_session_id(id);
    pb::CloseSessionResponse response;
    grpc::Status s = sessions_->CloseSession(&context, request, &response);
    if (!s.ok())
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    return response.deleted_tensors();
  }
  grpc::Status Persist(const std::string& tensor_id) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::PersistTensorsRequest request;
    request.add_tensor_ids(tensor_id);
    pb::PersistTensorsResponse response;
    return sessions_->PersistTensors(&context, request, &response);
  }
  // Uploads u8[bytes] on device 0, in `session` when set; the id or "".
  std::string Upload(int64_t bytes, const std::string& session,
                     grpc::Status* status = nullptr) const {
    grpc::ClientContext context;
    Prepare(&context, session);
    pb::UploadResponse response;
    auto writer = tensors_->Upload(&context, &response);
    pb::UploadRequest header;
    header.mutable_header()->set_dtype(pb::DTYPE_U8);
    header.mutable_header()->add_shape(bytes);
    writer->Write(header);
    pb::UploadRequest chunk;
    chunk.set_chunk(std::string(bytes, 'x'));
    writer->Write(chunk);
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    if (status != nullptr) *status = s;
    return s.ok() ? response.tensor().id() : "";
  }
  grpc::Status Delete(const std::string& id) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::DeleteTensorsRequest request;
    request.add_tensor_ids(id);
    pb::DeleteTensorsResponse response;
    return tensors_->Delete(&context, request, &response);
  }
  bool Exists(const std::string& id) const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::DescribeRequest request;
    request.set_tensor_id(id);
    pb::DescribeResponse response;
    return tensors_->Describe(&context, request, &response).ok();
  }
  int64_t MemoryInUse() const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::ListDevicesResponse response;
    EXPECT_TRUE(devices_->ListDevices(&context, {}, &response).ok());
    int64_t total = 0;
    for (const auto& d : response.devices()) total += d.memory_in_use_bytes();
    return total;
  }
  pb::GetStatusResponse Status() const {
    grpc::ClientContext context;
    Prepare(&context);
    pb::GetStatusResponse response;
    EXPECT_TRUE(daemon_->GetStatus(&context, {}, &response).ok());
    return response;
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::SessionService::Stub> sessions_;
  std::unique_ptr<pb::TensorService::Stub> tensors_;
  std::unique_ptr<pb::DeviceService::Stub> devices_;
  std::unique_ptr<pb::DaemonService::Stub> daemon_;
};

std::unique_ptr<DaemonProcess> StartDaemon() {
  auto daemon = DaemonProcess::Start(
      {.extra_flags = {"--backend=cpu", "--cpu_devices=2", "--session_sweep_interval=100ms"}});
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

TEST(SessionTest, CloseFreesTheSessionsTensorsOnly) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  Calls calls(daemon->address());
  auto session = calls.Open(60);
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_THAT(session->id(), ::testing::StartsWith("s-"));

  const std::string scoped = calls.Upload(4096, session->id());
  const std::string persisted = calls.Upload(4096, session->id());
  const std::string durable = calls.Upload(4096, "");
  ASSERT_FALSE(scoped.empty());
  ASSERT_FALSE(durable.empty());
  ASSERT_TRUE(calls.Persist(persisted).ok());
  pb::GetStatusResponse status = calls.Status();
  EXPECT_EQ(status.num_sessions(), 1);
  EXPECT_EQ(status.num_session_tensors(), 1);

  auto deleted = calls.Close(session->id());
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 1);
  EXPECT_FALSE(calls.Exists(scoped));
  EXPECT_TRUE(calls.Exists(persisted));
  EXPECT_TRUE(calls.Exists(durable));
  EXPECT_EQ(calls.Status().num_sessions(), 0);

  // A closed session can be neither renewed nor joined.
  EXPECT_EQ(calls.Renew(session->id()).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status joined;
  EXPECT_EQ(calls.Upload(16, session->id(), &joined), "");
  EXPECT_EQ(joined.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_THAT(joined.error_message(), HasSubstr("placement-session metadata: session '"));
  EXPECT_EQ(calls.Open(7200).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

// The child side of KilledClientsTensorsAreFreedAfterItsLease: opens a
// session with a 2 s lease, uploads 1 MiB into it, writes the tensor id to
// the file named by the environment, and keeps renewing until killed.
// A training loop's session: each step makes a result in the session and
// deletes it. The session must not remember every result it ever made
// (until stop 40 it did: num_session_tensors grew by one a step).
TEST(SessionTest, ALongSessionForgetsTheResultsItDeleted) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  Calls calls(daemon->address());
  auto session = calls.Open(60);
  ASSERT_TRUE(session.ok()) << session.status();
  for (int step = 0; step < 2500; ++step) {
    const std::string id = calls.Upload(16, session->id());
    ASSERT_FALSE(id.empty()) << "step " << step;
    ASSERT_TRUE(calls.Delete(id).ok()) << "step " << step;
  }
  // None lives: a session prunes when its ids reach 1024 (then twice what
  // lives), so it remembers at most 1024 of the 2500.
  EXPECT_LE(calls.Status().num_session_tensors(), 1024);
  ASSERT_TRUE(calls.Renew(session->id()).ok());  // a renewal forgets them all
  EXPECT_EQ(calls.Status().num_session_tensors(), 0);
  EXPECT_EQ(calls.MemoryInUse(), 0);
}

TEST(SessionChild, HoldsASessionUntilKilled) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) GTEST_SKIP() << "runs only as the child of SessionTest";
  const std::string text(spec);
  const size_t comma = text.find(',');
  Calls calls(text.substr(0, comma));
  auto session = calls.Open(2);
  ASSERT_TRUE(session.ok()) << session.status();
  const std::string id = calls.Upload(1 << 20, session->id());
  ASSERT_FALSE(id.empty());
  {
    std::ofstream out(text.substr(comma + 1) + ".tmp");
    out << id << "\n";
  }
  std::rename((text.substr(comma + 1) + ".tmp").c_str(), text.substr(comma + 1).c_str());
  for (;;) {
    calls.Renew(session->id());
    absl::SleepFor(absl::Milliseconds(200));
  }
}

TEST(SessionTest, KilledClientsTensorsAreFreedAfterItsLease) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  Calls calls(daemon->address());
  const int64_t baseline = calls.MemoryInUse();
  TempDir dir;
  const std::string ready = dir.path() + "/child_ready";

  // Everything the child needs is built before fork: between fork and exec
  // a multi-threaded parent's child may only make async-signal-safe calls.
  std::vector<std::string> env_strings = {
      absl::StrCat(kChildEnv, "=", daemon->address(), ",", ready)};
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string arg0 = "session_test";
  std::string filter = "--gtest_filter=SessionChild.*";
  char* argv[] = {arg0.data(), filter.data(), nullptr};
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    execve("/proc/self/exe", argv, envp.data());
    _exit(127);
  }
  const std::string tensor = testing::WaitForFileLine(ready, absl::Seconds(60));
  ASSERT_FALSE(tensor.empty()) << "the child never uploaded";
  EXPECT_TRUE(calls.Exists(tensor));
  EXPECT_EQ(calls.MemoryInUse(), baseline + (1 << 20));
  EXPECT_EQ(calls.Status().num_sessions(), 1);

  ASSERT_EQ(kill(child, SIGKILL), 0);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);

  // The lease (2 s) runs out and the next sweep (100 ms) frees the tensor;
  // waiting is bounded far above that.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (calls.Exists(tensor) && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(calls.Exists(tensor));
  EXPECT_EQ(calls.MemoryInUse(), baseline);
  EXPECT_EQ(calls.Status().num_sessions(), 0);
  EXPECT_THAT(daemon->Stderr(), HasSubstr("expired (lease not renewed); deleted 1 tensor(s)"));
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

}  // namespace
}  // namespace placement
