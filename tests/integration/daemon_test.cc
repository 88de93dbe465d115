// placementd as a process: device RPCs over real gRPC, startup errors with
// exit codes, drain on SIGTERM, unix sockets, metrics.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/client.h"
#include "placement/client/device_placement.h"
#include "placement/v1/device_service.grpc.pb.h"
#include "tests/testing/cluster_processes.h"
#include "tests/testing/daemon_process.h"

namespace placement {
namespace {

using testing::DaemonOptions;
using testing::DaemonProcess;
using ::testing::HasSubstr;

// The daemon's own checks of hardware names, through the wire (the client
// library takes a HardwareType and cannot send an unknown name).
absl::Status BatchSizeByName(const std::string& address, const std::string& name) {
  auto stub =
      v1::DeviceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::GetBatchSizeRecommendationRequest request;
  request.set_hardware_name(name);
  v1::GetBatchSizeRecommendationResponse response;
  return FromGrpcStatus(stub->GetBatchSizeRecommendation(&context, request, &response));
}

absl::Status ValidateByName(const std::string& address, int64_t batch_size,
                            const std::string& name) {
  auto stub =
      v1::DeviceService::NewStub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  v1::ValidateBatchSizeRequest request;
  request.set_batch_size(batch_size);
  request.set_hardware_name(name);
  v1::ValidateBatchSizeResponse response;
  return FromGrpcStatus(stub->ValidateBatchSize(&context, request, &response));
}

// These tests assert the CPU backend's own defaults (8 devices, hardware
// "cpu", its batch-size row), so they pin --backend=cpu even when the suite
// runs on a GPU (PLACEMENT_TEST_BACKEND=cuda); tests/gpu/gpu_daemon_test.cc
// asserts the same for the GPU.
std::unique_ptr<DaemonProcess> StartDaemon(DaemonOptions options = {}) {
  bool has_backend = false;
  for (const auto& f : options.extra_flags) has_backend |= f.rfind("--backend", 0) == 0;
  if (!has_backend) options.extra_flags.push_back("--backend=cpu");
  auto daemon = DaemonProcess::Start(options);
  EXPECT_TRUE(daemon.ok()) << daemon.status();
  return daemon.ok() ? std::move(*daemon) : nullptr;
}

TEST(DaemonTest, ListsEightCpuDevicesByDefault) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto client = daemon->Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  auto devices = (*client)->ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  ASSERT_EQ(devices->size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ((*devices)[i].id, i);
    EXPECT_EQ((*devices)[i].platform, "cpu");
    EXPECT_EQ((*devices)[i].hardware_type, client::HardwareType::kCpu);
    EXPECT_EQ((*devices)[i].memory_in_use_bytes, 0);
    EXPECT_GT((*devices)[i].memory_limit_bytes, 0);
  }
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

TEST(DaemonTest, DeviceInfoHasTheSeedsKeys) {
  auto daemon = StartDaemon({.extra_flags = {"--cpu_devices=4", "--cpu_device_memory=65536"}});
  ASSERT_NE(daemon, nullptr);
  auto client = std::move(*daemon->Connect());
  auto info = client->GetDeviceInfo();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_devices, 4);
  EXPECT_EQ(client::HardwareTypeName(info->hardware_type), "cpu");
  EXPECT_THAT(info->platforms, ::testing::ElementsAre("cpu"));
  EXPECT_THAT(info->device_kinds, ::testing::ElementsAre("cpu"));
  ASSERT_EQ(info->devices.size(), 4u);
  EXPECT_EQ(info->devices[3].id, 3);
  auto devices = client->ListDevices();
  EXPECT_EQ((*devices)[0].memory_limit_bytes, 65536);

  auto placement = client::DevicePlacement::Create(*client);
  ASSERT_TRUE(placement.ok()) << placement.status();
  EXPECT_EQ(placement->hardware_type(), client::HardwareType::kCpu);
  EXPECT_EQ(placement->num_devices(), 4);
  EXPECT_EQ(placement->default_device(), 0);
  EXPECT_EQ(client::DevicePlacement::Create(*client, 9).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(DaemonTest, BatchSizeRecommendationsForEveryHardware) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto client = std::move(*daemon->Connect());
  auto detected = client->GetBatchSizeRecommendation();
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(client::HardwareTypeName(detected->hardware_type), "cpu");
  EXPECT_EQ(detected->min_batch_size, 1);
  EXPECT_EQ(detected->optimal_batch_size, 32);
  EXPECT_EQ(detected->critical_batch_size, 16);
  EXPECT_FALSE(detected->max_memory_batch_size.has_value());
  EXPECT_FALSE(detected->roofline.has_value());

  struct Expect {
    std::string name;
    int64_t min, optimal, critical;
    bool roofline;
  };
  for (const Expect& e : std::vector<Expect>{{"tpu_v5e", 64, 256, 240, true},
                                             {"tpu_v5p", 128, 512, 480, true},
                                             {"tpu_v4", 64, 256, 192, true},
                                             {"h100", 64, 320, 298, true},
                                             {"a100", 32, 256, 240, true},
                                             {"v100", 16, 128, 96, true},
                                             {"cpu", 1, 32, 16, false},
                                             {"unknown", 32, 128, 64, false},
                                             {"h200", 32, 128, 64, true},
                                             {"b200", 32, 128, 64, true}}) {
    auto type = client::ParseHardwareType(e.name);
    ASSERT_TRUE(type.ok()) << e.name << ": " << type.status();
    auto rec = client->GetBatchSizeRecommendation(*type);
    ASSERT_TRUE(rec.ok()) << e.name << ": " << rec.status();
    EXPECT_EQ(client::HardwareTypeName(rec->hardware_type), e.name);
    EXPECT_EQ(rec->min_batch_size, e.min) << e.name;
    EXPECT_EQ(rec->optimal_batch_size, e.optimal) << e.name;
    EXPECT_EQ(rec->critical_batch_size, e.critical) << e.name;
    EXPECT_EQ(rec->roofline.has_value(), e.roofline) << e.name;
  }
  auto h100 = client->GetBatchSizeRecommendation(client::HardwareType::kH100);
  EXPECT_NEAR(h100->roofline->critical_batch_size, 295.2, 0.1);

  // A name the daemon does not know (the typed client cannot send one).
  auto bad = BatchSizeByName(daemon->address(), "tpu_v9");
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("accepted values: tpu_v5e"));
  // The daemon keeps serving after bad input.
  EXPECT_TRUE(client->ListDevices().ok());
}

TEST(DaemonTest, ValidateBatchSizeFollowsTheSeed) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto client = std::move(*daemon->Connect());
  auto zero = client->ValidateBatchSize(0);
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->valid);
  EXPECT_EQ(zero->message,
            "Batch size 0 is below minimum recommended 1 for cpu. Performance will be "
            "significantly degraded.");
  auto negative =
      client->ValidateBatchSize(-8, client::SuboptimalWarning::kWarn, client::HardwareType::kH100);
  EXPECT_FALSE(negative->valid);
  EXPECT_THAT(negative->message, HasSubstr("below minimum recommended 64 for h100"));
  auto optimal =
      client->ValidateBatchSize(512, client::SuboptimalWarning::kWarn, client::HardwareType::kH100);
  EXPECT_TRUE(optimal->valid);
  EXPECT_EQ(optimal->message, "Batch size 512 is optimal for h100.");
  auto quiet = client->ValidateBatchSize(100, client::SuboptimalWarning::kSilent,
                                         client::HardwareType::kH100);
  EXPECT_EQ(quiet->message, "Batch size 100 is acceptable for h100.");
  auto uneven = client->ValidateBatchSize(33);
  ASSERT_EQ(uneven->warnings.size(), 1u);
  EXPECT_THAT(uneven->warnings[0], HasSubstr("not divisible by the 8"));
  EXPECT_EQ(ValidateByName(daemon->address(), 64, "nope").code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(DaemonTest, StatusReportsBackendAndUptime) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  auto client = std::move(*daemon->Connect());
  auto status = client->GetStatus();
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(status->backend, "cpu");
  EXPECT_EQ(status->num_devices, 8);
  EXPECT_EQ(status->listen_address, daemon->address());
  EXPECT_EQ(status->instance_id.size(), 16u);
  EXPECT_TRUE(status->serving);
  EXPECT_FALSE(status->version.empty());
}

TEST(DaemonTest, ServesOnAUnixSocket) {
  auto daemon = StartDaemon({.unix_socket = true});
  ASSERT_NE(daemon, nullptr);
  EXPECT_THAT(daemon->address(), ::testing::StartsWith("unix:/"));
  auto client = daemon->Connect();
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->ListDevices()->size(), 8u);
  EXPECT_EQ(daemon->Stop(SIGINT), 0);
}

TEST(DaemonTest, SigtermDrainsAndExitsZero) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  ASSERT_TRUE((*daemon->Connect())->ListDevices().ok());
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
  EXPECT_THAT(daemon->Stderr(), HasSubstr("received SIGTERM; draining"));
  EXPECT_THAT(daemon->Stderr(), HasSubstr("drained; stopped serving"));
}

TEST(DaemonTest, AutoBackendFallsBackToCpuWithOneClearLogLine) {
  auto daemon = StartDaemon({.extra_flags = {"--backend=auto"}});
  ASSERT_NE(daemon, nullptr);
  auto status = (*daemon->Connect())->GetStatus();
  ASSERT_TRUE(status.ok());
  if (status->backend == "cuda") GTEST_SKIP() << "a GPU is present";
  EXPECT_THAT(daemon->Stderr(), HasSubstr("falling back to 8 CPU virtual devices"));
  EXPECT_THAT(status->backend_note, HasSubstr("no usable GPU"));
  // On a host without the NVIDIA driver the reason says so in plain words,
  // not as the CUDA runtime's "driver version is insufficient".
  if (PLACEMENT_WITH_CUDA && !std::filesystem::exists("/proc/driver/nvidia/version")) {
    EXPECT_THAT(status->backend_note, HasSubstr("no NVIDIA driver on this host"));
    EXPECT_THAT(status->backend_note, ::testing::Not(HasSubstr("driver version is insufficient")));
  }
}

TEST(DaemonStartupTest, AnUnwritableReadyFileFailsBeforeServing) {
  const std::string missing_dir = "/nonexistent-placementd-dir/ready";
  auto result = testing::RunCommand({testing::PlacementdBinary(), "--listen=127.0.0.1:0",
                                     "--backend=cpu", "--ready_file=" + missing_dir});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("cannot write --ready_file=" + missing_dir));
  EXPECT_THAT(result.err, HasSubstr("the directory /nonexistent-placementd-dir does not exist"));
  EXPECT_THAT(result.err, ::testing::Not(HasSubstr("serving on")));
  // A directory is no ready file either.
  auto dir = testing::RunCommand(
      {testing::PlacementdBinary(), "--listen=127.0.0.1:0", "--backend=cpu", "--ready_file=/tmp"});
  EXPECT_EQ(dir.exit_code, 1) << dir.err;
  EXPECT_THAT(dir.err, HasSubstr("cannot write --ready_file=/tmp: it is a directory"));
  EXPECT_THAT(dir.err, ::testing::Not(HasSubstr("serving on")));
}

TEST(DaemonStartupTest, BadFlagsFailWithClearMessages) {
  struct Case {
    std::vector<std::string> flags;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--listen=localhost"}, 2, "--listen='localhost' is invalid: missing ':port'"},
      {{"--listen=127.0.0.1:99999"}, 2, "the port must be in [0, 65535]"},
      {{"--listen=127.0.0.1:0", "--backend=cpu", "--cpu_devices=0"},
       2,
       "cpu_devices must be in [1, 1024], got 0"},
      {{"--listen=127.0.0.1:0", "--backend=tpu"}, 2, "--backend must be auto, cpu or cuda"},
      {{"--listen=127.0.0.1:0", "--log_level=loud"}, 2, "--log_level must be"},
      {{"--listen=127.0.0.1:0", "--backend=cpu", "--cluster_transport=carrier-pigeon"},
       2,
       "--cluster_transport='carrier-pigeon' is not a transport of this build; it has: "},
  };
  for (const Case& c : cases) {
    std::vector<std::string> argv = {testing::PlacementdBinary()};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    auto result = testing::RunCommand(argv);
    EXPECT_EQ(result.exit_code, c.exit_code) << c.flags[0] << "\n" << result.err;
    EXPECT_THAT(result.err, HasSubstr(c.message)) << c.flags[0];
  }
}

// A transport the operator names must work: a CPU daemon cannot run NCCL
// between daemons (a CUDA build has it; another build refuses the name).
TEST(DaemonStartupTest, AChosenTransportTheDevicesCannotUseStopsTheDaemon) {
  auto result = testing::RunCommand(
      {testing::PlacementdBinary(), "--listen=127.0.0.1:0", "--backend=cpu", "--num_processes=1",
       absl::StrCat("--coordinator=127.0.0.1:", testing::PickFreePort()),
       "--cluster_transport=nccl"});
  if (PLACEMENT_WITH_CUDA) {
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_THAT(result.err, HasSubstr("cluster: formed with 1 processes"));
    EXPECT_THAT(result.err,
                HasSubstr("--cluster_transport=nccl: nccl transport: needs the cuda platform's "
                          "GPUs; this daemon's devices are cpu (use gloo)"));
  } else {
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_THAT(result.err, HasSubstr("--cluster_transport='nccl' is not a transport"));
  }
  EXPECT_THAT(result.err, ::testing::Not(HasSubstr("serving on")));
}

TEST(DaemonStartupTest, CudaBackendWithoutGpuExitsNonZero) {
  auto result = testing::RunCommand(
      {testing::PlacementdBinary(), "--listen=127.0.0.1:0", "--backend=cuda"}, absl::Seconds(60));
  if (result.exit_code == -1) GTEST_SKIP() << "daemon started: a GPU is present";
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("--backend=cuda but no GPU is usable"));
}

TEST(DaemonStartupTest, PortInUseIsAClearError) {
  auto first = StartDaemon();
  ASSERT_NE(first, nullptr);
  auto result = testing::RunCommand(
      {testing::PlacementdBinary(), "--backend=cpu", "--listen=" + first->address()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("cannot listen on " + first->address()));
  EXPECT_THAT(result.err, HasSubstr("already in use"));
  // The first daemon is unaffected.
  EXPECT_TRUE((*first->Connect())->ListDevices().ok());
}

TEST(DaemonStartupTest, LiveUnixSocketIsNotStolen) {
  auto first = StartDaemon({.unix_socket = true});
  ASSERT_NE(first, nullptr);
  auto result = testing::RunCommand(
      {testing::PlacementdBinary(), "--backend=cpu", "--listen=" + first->address()});
  EXPECT_EQ(result.exit_code, 1) << result.err;
  EXPECT_THAT(result.err, HasSubstr("already in use by a running server"));
  EXPECT_TRUE((*first->Connect())->ListDevices().ok());
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    send(fd, request.data(), request.size(), 0);
    char buf[4096];
    for (int i = 0; i < 10000; ++i) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  return response;
}

TEST(DaemonTest, ExportsPrometheusMetrics) {
  // Pick a free port for metrics by binding and releasing one.
  int probe = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(probe);
  auto daemon =
      StartDaemon({.extra_flags = {"--metrics_listen=127.0.0.1:" + std::to_string(port)}});
  ASSERT_NE(daemon, nullptr);
  auto client = std::move(*daemon->Connect());
  ASSERT_TRUE(client->ListDevices().ok());
  EXPECT_FALSE(BatchSizeByName(daemon->address(), "zzz").ok());
  std::string text = HttpGet(port, "/metrics");
  EXPECT_THAT(text,
              HasSubstr("grpc_server_handled_total{grpc_code=\"OK\",grpc_method=\"ListDevices\","
                        "grpc_service=\"placement.v1.DeviceService\",grpc_type=\"unary\"} 1"));
  EXPECT_THAT(text, HasSubstr("grpc_server_handled_total{grpc_code=\"InvalidArgument\","));
  EXPECT_THAT(text,
              HasSubstr("placementd_device_memory_in_use_bytes{device=\"7\",platform=\"cpu\"} 0"));
  EXPECT_THAT(HttpGet(port, "/healthz"), HasSubstr("200 OK"));
}

TEST(DaemonTest, ConcurrentClients) {
  auto daemon = StartDaemon();
  ASSERT_NE(daemon, nullptr);
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      auto client = daemon->Connect();
      if (!client.ok()) {
        failures++;
        return;
      }
      for (int i = 0; i < 25; ++i) {
        if (!(*client)->ListDevices().ok()) failures++;
        if (!(*client)->ValidateBatchSize(i).ok()) failures++;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace placement
