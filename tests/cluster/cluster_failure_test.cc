// Failure in a cluster of real daemons: a daemon killed (SIGKILL) while a
// collective waits for it or runs through it -- the others answer
// UNAVAILABLE naming it within heartbeat_interval x misses, free what they
// held (device memory back to baseline), and the restarted daemon rejoins
// with the same process index and takes part in the next collective, also
// driven by it while a participant's view is still behind its rejoin.
#include <signal.h>

#include <cstdio>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/testing/process_probe.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::HostArray;
using client::Placement;
using ::testing::AnyOf;
using ::testing::HasSubstr;

class ClusterFailureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.num_processes = 3;
    options.devices_per_process = 2;
    options.device_memory = int64_t{256} << 20;
    options.extra_flags = {"--cluster_op_timeout=20s", "--metrics_listen=127.0.0.1:0"};
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    for (int p = 0; p < 3; ++p) {
      auto c = cluster_->Connect(p);
      ASSERT_TRUE(c.ok());
      clients_.push_back(*std::move(c));
    }
    client::MeshClient meshes(*clients_[0]);
    ASSERT_TRUE(meshes.Create({{"data", 6}}, {.mesh_id = "flat"}).ok());
  }

  // [6, 6 Mi] f32 of 0.5 on "flat", through daemon 0: 24 MiB per device,
  // long enough on two cores that a kill or stop lands inside a collective.
  absl::StatusOr<client::TensorInfo> UploadBig() {
    const int64_t cols = int64_t{6} << 20;
    std::vector<float> values(6 * cols, 0.5f);
    return client::TensorClient(*clients_[0])
        .Upload(HostArray::Of(values, {6, cols}), Placement::Sharded("flat", {{"data"}}));
  }

  // Polls daemon p's placementd_inflight_calls until it has a call running
  // (bounded: 30 s); false if it never does.
  bool HasCallInFlight(int p) {
    const int port = MetricsPort(cluster_->daemon(p).ReadyValue("metrics"));
    for (int i = 0; i < 600; ++i) {
      if (MetricValue(HttpGet(port, "/metrics"), "placementd_inflight_calls") >= 1) return true;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return false;
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::vector<std::unique_ptr<client::Client>> clients_;
};

TEST_F(ClusterFailureTest, KilledDaemonFailsWaitingMultiControllerCallsAndRejoins) {
  const std::vector<int64_t> baseline = MemoryOf(*clients_[0], {0, 1});
  client::TensorClient tensors(*clients_[0]);
  std::vector<float> values(6 * 4, 1.f);
  auto input =
      tensors.Upload(HostArray::Of(values, {6, 4}), Placement::Sharded("flat", {{"data"}}));
  ASSERT_TRUE(input.ok()) << input.status();

  // Processes 0 and 1's trainers call; process 2's never does, and its
  // daemon is killed while the others wait for it.
  std::vector<grpc::Status> statuses(2);
  std::vector<absl::Time> ended(2);
  std::vector<std::thread> trainers;
  for (int p = 0; p < 2; ++p) {
    trainers.emplace_back([&, p] {
      pb::AllReduceRequest request;
      request.set_tensor_id(input->id);
      request.set_controller(pb::CONTROLLER_MULTI);
      pb::CollectiveResponse response;
      statuses[p] = AllReduceOn(cluster_->address(p), request, &response);
      ended[p] = absl::Now();
    });
  }
  // Both calls are in their daemons, waiting for process 2.
  for (int p = 0; p < 2; ++p) EXPECT_TRUE(HasCallInFlight(p)) << "no call in flight on " << p;
  const absl::Time killed = absl::Now();
  cluster_->Kill(2);
  for (auto& t : trainers) t.join();
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(statuses[p].error_code(), grpc::StatusCode::UNAVAILABLE)
        << statuses[p].error_message();
    EXPECT_THAT(statuses[p].error_message(), HasSubstr("process 2"));
    // heartbeat 250 ms x 8 misses = 2 s, plus a sweep, a beat and slack for a
    // loaded 2-core machine.
    EXPECT_LT(ended[p] - killed, absl::Seconds(10));
  }
  // The input had shards on the lost daemon: freed on the survivors.
  EXPECT_TRUE(MemoryReturns(*clients_[0], {0, 1}, baseline));
  EXPECT_EQ(tensors.Describe(input->id).status().code(), absl::StatusCode::kNotFound);

  // The restarted daemon rejoins as process 2 and works again.
  ASSERT_TRUE(cluster_->Restart(2).ok()) << cluster_->daemon(2).Stderr();
  auto formed = WaitForStatus(*clients_[0], [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(formed.ok());
  ASSERT_EQ(formed->cluster.state, client::ClusterState::kFormed);
  EXPECT_EQ(formed->cluster.processes[2].joins, 2);
  auto again =
      tensors.Upload(HostArray::Of(values, {6, 4}), Placement::Sharded("flat", {{"data"}}));
  ASSERT_TRUE(again.ok()) << again.status();
  auto c2 = cluster_->Connect(2);
  ASSERT_TRUE(c2.ok());
  client::CollectiveClient collectives(**c2);
  auto sum = collectives.AllReduce(again->id, client::ReduceOp::kSum);
  ASSERT_TRUE(sum.ok()) << sum.status();
  std::vector<float> got(4);
  ASSERT_TRUE(tensors.Download(sum->id, client::AsWritableBytes(got)).ok());
  EXPECT_EQ(got[0], 6.f);
}

// A participant that heard of a loss but not yet of the rejoin after it:
// process 1 beats every 3 s (the others every 250 ms; the coordinator
// declares a process lost after 8 s). After process 2 is killed and
// rejoins, the first collective process 2 drives over 0,1,2 reaches process
// 1 with a ticket of the newer epoch while process 1's view still says 2 is
// lost. Process 1 asks for a beat and takes part; before, it refused and the
// others waited out --cluster_op_timeout (20 s) in their rendezvous.
TEST(ClusterStaleViewTest, AParticipantBehindTheDriversEpochCatchesUpAndTakesPart) {
  ClusterOptions options;
  options.num_processes = 3;
  options.devices_per_process = 2;
  options.heartbeat_misses = 32;  // 8 s at 250 ms: process 1's 3 s beats have 5 s to spare
  options.extra_flags = {"--cluster_op_timeout=20s"};
  options.per_process = {{}, {"--heartbeat_interval=3s"}, {}};
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto c0 = (*cluster)->Connect(0);
  auto c1 = (*cluster)->Connect(1);
  ASSERT_TRUE(c0.ok() && c1.ok());
  ASSERT_TRUE(client::MeshClient(**c0).Create({{"data", 6}}, {.mesh_id = "flat"}).ok());
  (*cluster)->Kill(2);
  // Process 1 has heard of the loss (its view: 2 lost).
  auto heard = WaitForStatus(
      **c1,
      [](const client::DaemonStatus& s) {
        return s.cluster.processes.size() == 3 &&
               s.cluster.processes[2].state != client::ProcessState::kAlive;
      },
      absl::Seconds(30));
  ASSERT_TRUE(heard.ok()) << heard.status();
  ASSERT_NE(heard->cluster.processes[2].state, client::ProcessState::kAlive);
  ASSERT_TRUE((*cluster)->Restart(2).ok()) << (*cluster)->daemon(2).Stderr();
  auto formed = WaitForStatus(**c0, [](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed;
  });
  ASSERT_TRUE(formed.ok());
  ASSERT_EQ(formed->cluster.state, client::ClusterState::kFormed);
  const int64_t epoch = formed->cluster.epoch;
  std::vector<float> values(6 * 4, 1.f);
  auto input = client::TensorClient(**c0).Upload(HostArray::Of(values, {6, 4}),
                                                 Placement::Sharded("flat", {{"data"}}));
  ASSERT_TRUE(input.ok()) << input.status();
  auto c2 = (*cluster)->Connect(2);
  ASSERT_TRUE(c2.ok());
  // Whether process 1 was still behind when the call reached it.
  auto before = (*c1)->GetStatus();
  ASSERT_TRUE(before.ok());
  const bool behind = before->cluster.epoch < epoch;
  const absl::Time start = absl::Now();
  auto sum = client::CollectiveClient(**c2).AllReduce(input->id, client::ReduceOp::kSum);
  ASSERT_TRUE(sum.ok()) << sum.status();
  GTEST_LOG_(INFO) << "process 1 was " << (behind ? "behind" : "already at")
                   << " the rejoin's epoch; the collective took " << absl::Now() - start;
  std::vector<float> got(4);
  ASSERT_TRUE(client::TensorClient(**c2).Download(sum->id, client::AsWritableBytes(got)).ok());
  EXPECT_EQ(got[0], 6.f);
}

TEST_F(ClusterFailureTest, KilledDaemonFailsARunningCollective) {
  const std::vector<int64_t> baseline = MemoryOf(*clients_[0], {0, 2});
  client::TensorClient tensors(*clients_[0]);
  auto input = UploadBig();
  ASSERT_TRUE(input.ok()) << input.status();
  client::CollectiveClient collectives(*clients_[0]);
  absl::Status result;
  absl::Time ended;
  std::thread driver([&] {
    result = collectives.AllReduce(input->id, client::ReduceOp::kSum).status();
    ended = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(150));
  const absl::Time killed = absl::Now();
  cluster_->Kill(1);
  driver.join();
  if (result.ok()) {
    GTEST_LOG_(INFO) << "the collective finished before the kill";
  } else {
    EXPECT_EQ(result.code(), absl::StatusCode::kUnavailable) << result;
    EXPECT_THAT(std::string(result.message()), HasSubstr("process 1")) << result;
    EXPECT_LT(ended - killed, absl::Seconds(25));
  }
  // Nothing half-made survives on the daemons that are left.
  EXPECT_TRUE(MemoryReturns(*clients_[0], {0, 2}, baseline));
}

// A daemon that stops answering mid-collective without closing anything
// (SIGSTOP: its sockets stay open, like a host cut off by a partition):
// before, the others' Gloo operation waited out --cluster_op_timeout (20 s
// here); now membership's loss (250 ms x 8) aborts it, UNAVAILABLE naming
// the process.
TEST_F(ClusterFailureTest, StoppedDaemonFailsARunningCollectiveWithinTheDetectionBound) {
  const std::vector<int64_t> baseline = MemoryOf(*clients_[0], {0, 2});
  client::TensorClient tensors(*clients_[0]);
  auto input = UploadBig();
  ASSERT_TRUE(input.ok()) << input.status();
  client::CollectiveClient collectives(*clients_[0]);
  // A first collective on the set connects its transport group, so the
  // stop lands in the Gloo operation (a rendezvous still in progress with a
  // process that stops waits out its budget: docs/cluster.md).
  auto warm = collectives.AllReduce(input->id, client::ReduceOp::kSum);
  ASSERT_TRUE(warm.ok()) << warm.status();
  ASSERT_TRUE(tensors.Delete({warm->id}).ok());
  absl::StatusOr<client::TensorInfo> result;
  absl::Time ended;
  std::thread driver([&] {
    result = collectives.AllReduce(input->id, client::ReduceOp::kSum);
    ended = absl::Now();
  });
  // Soon after the call starts: a fast machine finishes it in ~150 ms.
  absl::SleepFor(absl::Milliseconds(30));
  const absl::Time stopped = absl::Now();
  ASSERT_EQ(kill(cluster_->daemon(1).pid(), SIGSTOP), 0);
  driver.join();
  ASSERT_EQ(kill(cluster_->daemon(1).pid(), SIGCONT), 0);
  if (result.ok()) {
    GTEST_LOG_(INFO) << "the collective finished before the stop";
    // Nothing was lost: the test frees what it made.
    ASSERT_TRUE(tensors.Delete({result->id, input->id}).ok());
  } else {
    EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
    EXPECT_THAT(std::string(result.status().message()), HasSubstr("process 1")) << result.status();
    // Within the detection bound and a loaded machine's slack, well before
    // the 20 s operation timeout.
    EXPECT_LT(ended - stopped, absl::Seconds(12)) << result.status();
    std::printf("stopped daemon: the collective ended %s after the stop: %s\n",
                absl::FormatDuration(ended - stopped).c_str(), result.status().ToString().c_str());
  }
  EXPECT_TRUE(MemoryReturns(*clients_[0], {0, 2}, baseline));
  // The stopped daemon finds itself dropped and joins again.
  auto formed = WaitForStatus(
      *clients_[0],
      [](const client::DaemonStatus& s) {
        return s.cluster.state == client::ClusterState::kFormed;
      },
      absl::Seconds(30));
  ASSERT_TRUE(formed.ok()) << formed.status();
  EXPECT_EQ(formed->cluster.state, client::ClusterState::kFormed);
}

// A daemon the others dropped (SIGSTOP past the detection bound, like a
// host cut off) and that joins again forgets the tensors deleted while it
// was out and learns those made meanwhile; the others' tensors it held
// stay. Before, it kept the deleted ones' records for good: listed and
// described, but no daemon held their bytes.
TEST_F(ClusterFailureTest, ADroppedDaemonForgetsWhatWasDeletedWhileItWasOut) {
  client::TensorClient tensors(*clients_[0]);
  std::vector<float> values(16, 1.f);
  auto upload = [&](int64_t device) {
    return tensors.Upload(HostArray::Of(values, {16}), Placement::Device(device));
  };
  auto kept = upload(0);    // process 0
  auto doomed = upload(2);  // process 1
  ASSERT_TRUE(kept.ok() && doomed.ok()) << kept.status() << doomed.status();
  client::TensorClient on_2(*clients_[2]);
  ASSERT_TRUE(on_2.Describe(doomed->id).ok());

  ASSERT_EQ(kill(cluster_->daemon(2).pid(), SIGSTOP), 0);
  auto dropped = WaitForStatus(
      *clients_[0],
      [](const client::DaemonStatus& s) { return ProcessIs(s, 2, client::ProcessState::kLost); },
      absl::Seconds(30));
  ASSERT_TRUE(dropped.ok() && ProcessIs(*dropped, 2, client::ProcessState::kLost));
  ASSERT_TRUE(tensors.Delete({doomed->id}).ok());
  auto made = upload(3);  // while process 2 is out
  ASSERT_TRUE(made.ok()) << made.status();
  ASSERT_EQ(kill(cluster_->daemon(2).pid(), SIGCONT), 0);

  // Back in: it copies what was made meanwhile (bounded: 30 s).
  bool synced = false;
  for (int i = 0; i < 600 && !synced; ++i) {
    synced = on_2.Describe(made->id).ok();
    if (!synced) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(synced) << "the rejoined daemon never listed the tensor made while it was out";
  EXPECT_EQ(on_2.Describe(doomed->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(on_2.Describe(kept->id).ok());
  auto listed = on_2.List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  for (const client::TensorInfo& t : *listed) EXPECT_NE(t.id, doomed->id);
}

}  // namespace
}  // namespace placement::testing
