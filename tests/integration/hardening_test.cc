// The smaller holes of issue 23, each against a real daemon, each checking
// the status code, the message's key words, that the daemon keeps serving
// and that what the call took is back:
//   - an unknown hardware_name of 1 MiB is INVALID_ARGUMENT with a short
//     message (before: echoed whole, RESOURCE_EXHAUSTED "metadata size
//     exceeds hard limit");
//   - with authentication on, GetStatus and ListDevices show a tenant its
//     own tensors, bytes and sessions (before: everybody's), admins all;
//   - a mesh created in a session ends with it (unless persisted tensors
//     use it);
//   - sessions are bounded (--max_sessions, --tenant_max_sessions);
//   - a Prefetch buffer_size of INT32_MAX is INVALID_ARGUMENT;
//   - a CPU budget larger than the host's memory is warned about at start.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/src/client_impl.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/meshes.h"
#include "placement/client/session.h"
#include "placement/client/tensors.h"
#include "placement/v1/daemon_service.grpc.pb.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "placement/v1/prefetch_service.grpc.pb.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "server/auth/credentials_file.h"
#include "tests/testing/auth_tokens.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/process_probe.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using testing::DaemonProcess;
using ::testing::HasSubstr;

std::unique_ptr<DaemonProcess> Start(std::vector<std::string> flags) {
  flags.insert(flags.begin(), {"--backend=cpu", "--cpu_devices=2"});
  auto daemon = DaemonProcess::Start({.extra_flags = flags});
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? *std::move(daemon) : nullptr;
}

std::unique_ptr<Client> Connect(const DaemonProcess& daemon, const std::string& token = "",
                                const std::string& session = "") {
  ClientOptions options;
  options.token = token;
  options.session_id = session;
  // These tests open, count and scope sessions themselves.
  options.session_policy = SessionPolicy::kNone;
  auto client = Client::Connect(daemon.address(), options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? *std::move(client) : nullptr;
}

using testing::Sha256Hex;

// GetStatus as the caller sees it (every field, sessions included).
pb::GetStatusResponse Status(const Client& client) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::GetStatusResponse response;
  grpc::Status status =
      pb::DaemonService::NewStub(client.impl().channel)->GetStatus(&context, {}, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response;
}

TEST(HardeningTest, AHugeUnknownHardwareNameIsInvalidArgumentWithoutEcho) {
  auto daemon = Start({});
  ASSERT_NE(daemon, nullptr);
  auto client = Connect(*daemon);
  const int64_t fds = testing::OpenFds(daemon->pid());
  auto stub = pb::DeviceService::NewStub(client->impl().channel);
  pb::GetBatchSizeRecommendationRequest request;
  request.set_hardware_name(std::string(1 << 20, 'z'));
  grpc::ClientContext context;
  client->impl().PrepareContext(&context);
  pb::GetBatchSizeRecommendationResponse response;
  grpc::Status status = stub->GetBatchSizeRecommendation(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown hardware type 'zzzz"));
  EXPECT_THAT(status.error_message(), HasSubstr("...' (1048576 bytes; names are at most 64)"));
  EXPECT_LT(status.error_message().size(), 1024u);
  // A short unknown name is still echoed whole; the daemon serves on.
  request.set_hardware_name("tpu-v9");
  grpc::ClientContext again;
  client->impl().PrepareContext(&again);
  status = stub->GetBatchSizeRecommendation(&again, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown hardware type 'tpu-v9'"));
  ASSERT_TRUE(client->GetStatus().ok());
  EXPECT_LE(testing::OpenFds(daemon->pid()), fds + 2);
}

TEST(HardeningTest, ATenantSeesItsOwnFiguresAndAnAdminEverybodys) {
  testing::TempDir dir;
  const std::string creds = dir.path() + "/creds";
  std::ofstream(creds) << "token sha256:" << Sha256Hex("alpha-token") << " team-a user alice\n"
                       << "token sha256:" << Sha256Hex("bravo-token") << " team-b user bob\n"
                       << "token sha256:" << Sha256Hex("root-token") << " ops admin root\n";
  auto daemon = Start({"--auth_file=" + creds});
  ASSERT_NE(daemon, nullptr);
  auto a = Connect(*daemon, "alpha-token");
  auto b = Connect(*daemon, "bravo-token");
  auto admin = Connect(*daemon, "root-token");
  auto session = Session::Open(*a, absl::Seconds(30));
  ASSERT_TRUE(session.ok()) << session.status();
  auto tensor = TensorClient(*a).Upload(HostArray{DType::kU8, {5000}, std::vector<uint8_t>(5000)},
                                        Placement::Device(1));
  ASSERT_TRUE(tensor.ok()) << tensor.status();

  const pb::GetStatusResponse seen_by_a = Status(*a);
  EXPECT_EQ(seen_by_a.num_tensors(), 1);
  EXPECT_EQ(seen_by_a.num_sessions(), 1);
  EXPECT_EQ(seen_by_a.device_bytes_in_use(), 5000);
  // Before, B saw A's tensor count, bytes and sessions.
  const pb::GetStatusResponse seen_by_b = Status(*b);
  EXPECT_EQ(seen_by_b.num_tensors(), 0);
  EXPECT_EQ(seen_by_b.num_sessions(), 0);
  EXPECT_EQ(seen_by_b.device_bytes_in_use(), 0);
  // The devices held in a local: a range-for over *StatusOr of a
  // temporary would read the temporary after its end.
  const auto devices = b->ListDevices();
  for (const auto& device : devices.value()) {
    EXPECT_EQ(device.memory_in_use_bytes, 0) << device.id;
    EXPECT_EQ(device.memory_charged_bytes, 0) << device.id;
    EXPECT_EQ(device.memory_cached_bytes, 0) << device.id;
    EXPECT_GT(device.memory_limit_bytes, 0);  // the device itself is no secret
  }
  auto a_devices = a->ListDevices();
  ASSERT_TRUE(a_devices.ok());
  EXPECT_EQ((*a_devices)[1].memory_in_use_bytes, 5000);
  EXPECT_EQ((*a_devices)[1].memory_charged_bytes, 8192 + 2048);
  EXPECT_EQ((*a_devices)[0].memory_in_use_bytes, 0);
  // An admin sees the daemon's figures.
  const pb::GetStatusResponse seen_by_admin = Status(*admin);
  EXPECT_EQ(seen_by_admin.num_tensors(), 1);
  EXPECT_EQ(seen_by_admin.num_sessions(), 1);
  EXPECT_EQ((*admin->ListDevices())[1].memory_in_use_bytes, 5000);
  ASSERT_TRUE(TensorClient(*a).Delete({tensor->id}).ok());
  EXPECT_EQ(admin->GetStatus()->device_bytes_in_use, 0);
}

TEST(HardeningTest, AMeshMadeInASessionEndsWithIt) {
  auto daemon = Start({});
  ASSERT_NE(daemon, nullptr);
  auto plain = Connect(*daemon);
  for (bool persist : {false, true}) {
    auto session = Session::Open(*plain, absl::Seconds(30));
    ASSERT_TRUE(session.ok()) << session.status();
    auto scoped = Connect(*daemon, "", (*session)->id());
    auto mesh = MeshClient(*scoped).Create({{"data", 2}});
    ASSERT_TRUE(mesh.ok()) << mesh.status();
    EXPECT_EQ(MeshClient(*plain).Get(mesh->id).status().code(), absl::StatusCode::kOk);
    std::string kept;
    if (persist) {
      // A tensor on the mesh, made durable: the mesh must outlive the
      // session with it.
      auto tensor = TensorClient(*scoped).Upload(
          HostArray{DType::kU8, {8}, std::vector<uint8_t>(8)}, Placement::Replicated(*mesh));
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      grpc::ClientContext context;
      plain->impl().PrepareContext(&context);
      pb::PersistTensorsRequest request;
      request.add_tensor_ids(tensor->id);
      pb::PersistTensorsResponse response;
      ASSERT_TRUE(pb::SessionService::NewStub(plain->impl().channel)
                      ->PersistTensors(&context, request, &response)
                      .ok());
      kept = tensor->id;
    }
    ASSERT_TRUE((*session)->Close().ok());
    auto after = MeshClient(*plain).Get(mesh->id);
    if (persist) {
      ASSERT_TRUE(after.ok()) << after.status();
      ASSERT_TRUE(TensorClient(*plain).Delete({kept}).ok());
      ASSERT_TRUE(MeshClient(*plain).Delete(mesh->id).ok());
    } else {
      // Before, the mesh outlived its session for good.
      EXPECT_EQ(after.status().code(), absl::StatusCode::kNotFound);
    }
  }
  EXPECT_EQ(plain->GetStatus()->num_meshes, 0);
}

TEST(HardeningTest, SessionsAreBounded) {
  auto daemon = Start({"--max_sessions=3", "--tenant_max_sessions=2"});
  ASSERT_NE(daemon, nullptr);
  auto client = Connect(*daemon);
  std::vector<std::unique_ptr<Session>> open;
  for (int i = 0; i < 2; ++i) {
    auto s = Session::Open(*client, absl::Seconds(30));
    ASSERT_TRUE(s.ok()) << s.status();
    open.push_back(*std::move(s));
  }
  auto third = Session::Open(*client, absl::Seconds(30));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(),
              HasSubstr("cannot open a session: the tenant has 2 of --tenant_max_sessions=2 open"));
  ASSERT_TRUE(open.back()->Close().ok());
  open.pop_back();
  EXPECT_TRUE(Session::Open(*client, absl::Seconds(30)).ok());
  EXPECT_EQ(Status(*client).num_sessions(), 1);

  auto total = Start({"--max_sessions=2", "--tenant_max_sessions=0"});
  ASSERT_NE(total, nullptr);
  auto other = Connect(*total);
  auto s1 = Session::Open(*other, absl::Seconds(30));
  auto s2 = Session::Open(*other, absl::Seconds(30));
  ASSERT_TRUE(s1.ok() && s2.ok());
  auto s3 = Session::Open(*other, absl::Seconds(30));
  EXPECT_EQ(s3.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s3.status().message(), HasSubstr("2 of --max_sessions=2 are open"));
  ASSERT_TRUE(other->GetStatus().ok());
}

TEST(HardeningTest, APrefetchBufferSizeIsBounded) {
  auto daemon = Start({});
  ASSERT_NE(daemon, nullptr);
  auto client = Connect(*daemon);
  auto stub = pb::PrefetchService::NewStub(client->impl().channel);
  for (int32_t size : {std::numeric_limits<int32_t>::max(), 1025}) {
    grpc::ClientContext context;
    client->impl().PrepareContext(&context);
    auto stream = stub->Prefetch(&context);
    pb::PrefetchRequest open;
    open.mutable_open()->set_buffer_size(size);
    stream->Write(open);
    stream->WritesDone();
    pb::PrefetchResponse response;
    while (stream->Read(&response)) {
    }
    grpc::Status status = stream->Finish();
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_EQ(status.error_message(),
              absl::StrCat("open.buffer_size is ", size,
                           "; must be in [1, 1024] (0 selects the default 2)"));
  }
  // The stream leaves the registry when its reactor is done, which the
  // daemon runs after the client already has the status: wait for it.
  int64_t streams = -1;
  for (absl::Time end = absl::Now() + absl::Seconds(30); absl::Now() < end;
       absl::SleepFor(absl::Milliseconds(10))) {
    auto status = client->GetStatus();
    ASSERT_TRUE(status.ok());
    streams = status->num_prefetch_streams;
    if (streams == 0) break;
  }
  EXPECT_EQ(streams, 0);
}

TEST(HardeningTest, ACpuBudgetBeyondTheHostsMemoryIsWarnedAbout) {
  const int64_t physical = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  auto daemon = Start({absl::StrCat("--cpu_device_memory=", physical)});
  ASSERT_NE(daemon, nullptr);
  EXPECT_THAT(daemon->Stderr(),
              HasSubstr(absl::StrCat("2 CPU devices x ", physical, " bytes = ", 2 * physical,
                                     " bytes of budget, more than the host's ", physical,
                                     " bytes of physical memory")));
  auto client = Connect(*daemon);
  ASSERT_TRUE(client->GetStatus().ok());
}

}  // namespace
}  // namespace placement::client
