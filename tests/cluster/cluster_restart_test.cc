// A cluster that survives its coordinator (docs/cluster.md, "Coordinator
// restart"): process 0 is SIGKILLed -- between collectives or while one runs
// -- and started again. The survivors notice the new incarnation, retire
// every ticket and transport group of the old one (the new coordinator's
// epochs start above theirs), keep their tensors that did not touch
// process 0, register their meshes with the new coordinator, and the next
// 20 collectives of every kind, driven from every daemon (the new process
// 0 included) and multi-controller, all succeed without restarting anyone.
// 2 and 3 daemons on loopback, and 3 in network namespaces where they can
// be made.
#include <cstdlib>
#include <cstring>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::CollectiveClient;
using client::HostArray;
using client::Placement;
using client::ReduceOp;
using client::SourceHandling;
using ::testing::HasSubstr;

struct RestartCase {
  int processes = 2;
  bool mid_collective = false;  // kill while a collective runs
  bool namespaces = false;
};

std::string CaseName(const ::testing::TestParamInfo<RestartCase>& info) {
  return absl::StrCat(info.param.processes, "_daemons_",
                      info.param.mid_collective ? "mid_collective" : "between_collectives",
                      info.param.namespaces ? "_netns" : "");
}

constexpr int kDevices = 2;  // per daemon

class ClusterRestartTest : public ::testing::TestWithParam<RestartCase> {
 protected:
  void SetUp() override {
    if (GetParam().namespaces && !NetworkNamespaces::Usable().ok()) {
      GTEST_SKIP() << "network namespaces cannot be made on this machine ("
                   << NetworkNamespaces::Usable() << ")";
    }
    ClusterOptions options;
    options.num_processes = GetParam().processes;
    options.devices_per_process = kDevices;
    options.device_memory = int64_t{256} << 20;
    options.namespaces = GetParam().namespaces;
    options.extra_flags = {"--cluster_op_timeout=20s"};
    // For docs/benchmarks.md's restart figure at a production-like beat:
    // PLACEMENT_RESTART_HEARTBEAT=1s (the test's default: 250 ms).
    if (const char* beat = std::getenv("PLACEMENT_RESTART_HEARTBEAT"); beat != nullptr) {
      ASSERT_TRUE(absl::ParseDuration(beat, &options.heartbeat_interval)) << beat;
    }
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    Reconnect();
    n_ = GetParam().processes * kDevices;
    // Made through the last daemon, a survivor.
    client::MeshClient meshes(*clients_.back());
    ASSERT_TRUE(meshes.Create({{"data", n_}}, {.mesh_id = "flat"}).ok());
    // The survivors' own devices: process 1's (2 daemons) or 1's and 2's.
    std::vector<int64_t> survivors;
    for (int64_t d = kDevices; d < std::min<int64_t>(n_, 3 * kDevices); ++d) survivors.push_back(d);
    ASSERT_TRUE(meshes
                    .Create({{"data", static_cast<int64_t>(survivors.size())}},
                            {.mesh_id = "survivors", .device_ids = survivors})
                    .ok());
  }

  // Durable results (no session): the test reconnects after the restart,
  // and what it made before must outlive its first clients.
  void Reconnect() {
    clients_.clear();
    client::ClientOptions options;
    options.session_policy = client::SessionPolicy::kNone;
    for (int p = 0; p < cluster_->size(); ++p) {
      auto c = cluster_->Connect(p, options);
      ASSERT_TRUE(c.ok()) << c.status();
      clients_.push_back(*std::move(c));
    }
  }

  client::TensorClient Tensors(int p) { return client::TensorClient(*clients_[p]); }
  CollectiveClient Collectives(int p) { return CollectiveClient(*clients_[p]); }

  // [rows * blocks, 4] f64 on `mesh` (one block of `rows` per device):
  // element (r, c) = r * 10 + c.
  std::string Rows(int via, const std::string& mesh, int64_t blocks, int64_t rows = 1) {
    std::vector<double> all(blocks * rows * 4);
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<double>(i / 4 * 10 + i % 4);
    auto info = Tensors(via).Upload(HostArray::Of(all, {blocks * rows, 4}),
                                    Placement::Sharded(mesh, {{"data"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id : "";
  }

  std::vector<double> Doubles(int via, const std::string& id) {
    auto bytes = Tensors(via).DownloadBytes(id);
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    std::vector<double> out(bytes.ok() ? bytes->bytes.size() / 8 : 0);
    if (!out.empty()) std::memcpy(out.data(), bytes->bytes.data(), bytes->bytes.size());
    return out;
  }

  // Collective i of a round, of kind i % 5, driven from daemon i % P; the
  // result is checked against its reference and deleted.
  void OneCollective(int i) {
    const int p = i % cluster_->size();
    const int reader = (i + 1) % cluster_->size();
    SCOPED_TRACE(absl::StrCat("collective ", i, " driven from process ", p));
    switch (i % 5) {
      case 0: {  // all-reduce: the sum of every device's row
        const std::string id = Rows(p, "flat", n_);
        auto sum = Collectives(p).AllReduce(id, ReduceOp::kSum);
        ASSERT_TRUE(sum.ok()) << sum.status();
        std::vector<double> got = Doubles(reader, sum->id);
        ASSERT_EQ(got.size(), 4u);
        for (int c = 0; c < 4; ++c) EXPECT_EQ(got[c], 10.0 * n_ * (n_ - 1) / 2 + n_ * c);
        ASSERT_TRUE(Tensors(p).Delete({sum->id, id}).ok());
        break;
      }
      case 1: {  // all-gather: every device holds the whole array
        const std::string id = Rows(p, "flat", n_, 2);
        auto gathered = Collectives(p).AllGather(id, 0);
        ASSERT_TRUE(gathered.ok()) << gathered.status();
        std::vector<double> got = Doubles(reader, gathered->id);
        ASSERT_EQ(got.size(), static_cast<size_t>(n_ * 2 * 4));
        EXPECT_EQ(got.back(), (n_ * 2 - 1) * 10.0 + 3);
        ASSERT_TRUE(Tensors(p).Delete({gathered->id, id}).ok());
        break;
      }
      case 2: {  // reduce-scatter of a partial tensor: device d gives d + j
        std::vector<std::string> pieces;
        const int64_t len = n_ * 2;
        for (int d = 0; d < n_; ++d) {
          std::vector<double> piece(len);
          for (int64_t j = 0; j < len; ++j) piece[j] = d + j;
          auto info =
              Tensors(d / kDevices).Upload(HostArray::Of(piece, {len}), Placement::Device(d));
          ASSERT_TRUE(info.ok()) << info.status();
          pieces.push_back(info->id);
        }
        auto partial =
            Tensors(p).Assemble({len}, Placement::Sharded("flat", {}).WithPartial({"data"}), pieces,
                                SourceHandling::kDonate);
        ASSERT_TRUE(partial.ok()) << partial.status();
        auto scattered = Collectives(p).ReduceScatter(partial->id, ReduceOp::kSum, 0);
        ASSERT_TRUE(scattered.ok()) << scattered.status();
        std::vector<double> got = Doubles(reader, scattered->id);
        ASSERT_EQ(got.size(), static_cast<size_t>(len));
        for (int64_t j = 0; j < len; ++j) EXPECT_EQ(got[j], n_ * (n_ - 1) / 2.0 + n_ * j);
        ASSERT_TRUE(Tensors(p).Delete({scattered->id, partial->id}).ok());
        break;
      }
      case 3: {  // broadcast from the last device
        const std::string id = Rows(p, "flat", n_);
        auto spread = Collectives(p).Broadcast(id, n_ - 1);
        ASSERT_TRUE(spread.ok()) << spread.status();
        std::vector<double> got = Doubles(reader, spread->id);
        ASSERT_EQ(got.size(), 4u);
        EXPECT_EQ(got[1], (n_ - 1) * 10.0 + 1);
        ASSERT_TRUE(Tensors(p).Delete({spread->id, id}).ok());
        break;
      }
      case 4: {  // multi-controller all-reduce: every daemon's trainer calls
        const std::string id = Rows(p, "flat", n_);
        std::vector<grpc::Status> statuses(cluster_->size());
        std::vector<pb::CollectiveResponse> responses(cluster_->size());
        std::vector<std::thread> trainers;
        for (int q = 0; q < cluster_->size(); ++q) {
          trainers.emplace_back([&, q] {
            pb::AllReduceRequest request;
            request.set_tensor_id(id);
            request.set_controller(pb::CONTROLLER_MULTI);
            statuses[q] = AllReduceOn(cluster_->address(q), request, &responses[q]);
          });
        }
        for (auto& t : trainers) t.join();
        for (int q = 0; q < cluster_->size(); ++q) {
          ASSERT_TRUE(statuses[q].ok()) << "process " << q << ": " << statuses[q].error_message();
        }
        const std::string result = responses[0].tensor().id();
        std::vector<double> got = Doubles(reader, result);
        ASSERT_EQ(got.size(), 4u);
        EXPECT_EQ(got[3], 10.0 * n_ * (n_ - 1) / 2 + n_ * 3);
        ASSERT_TRUE(Tensors(p).Delete({result, id}).ok());
        break;
      }
    }
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::vector<std::unique_ptr<client::Client>> clients_;
  int64_t n_ = 0;
};

TEST_P(ClusterRestartTest, CollectivesWorkAgainWithoutRestartingTheSurvivors) {
  const int last = cluster_->size() - 1;
  // Collectives before: every set has tickets and transport groups of the
  // first coordinator's epochs.
  for (int i = 0; i < 5; ++i) OneCollective(i);
  // A tensor on the survivors only, and one that touches process 0.
  const std::string kept = Rows(last, "survivors", (cluster_->size() - 1) * kDevices);
  const std::string touched = Rows(last, "flat", n_);
  auto before = clients_[last]->GetStatus();
  ASSERT_TRUE(before.ok());

  std::thread running;
  absl::Status in_flight;
  absl::Time in_flight_ended;
  std::string big;
  if (GetParam().mid_collective) {
    // The driver's Gloo group over "flat" connected first, by a small call,
    // so that the kill below lands in the collective's transfer (the case
    // this test is for; a kill during the connect is
    // gloo_ring_context_test's).
    {
      std::vector<double> one(n_, 1.0);
      auto small =
          Tensors(last).Upload(HostArray::Of(one, {n_, 1}), Placement::Sharded("flat", {{"data"}}));
      ASSERT_TRUE(small.ok()) << small.status();
      auto sum = Collectives(last).AllReduce(small->id, ReduceOp::kSum);
      ASSERT_TRUE(sum.ok()) << sum.status();
      ASSERT_TRUE(Tensors(last).Delete({sum->id, small->id}).ok());
    }
    // Long enough on two cores that the kill lands inside: 16 MiB a device.
    const int64_t cols = int64_t{2} << 20;
    std::vector<double> values(n_ * cols, 0.5);
    auto info = Tensors(last).Upload(HostArray::Of(values, {n_, cols}),
                                     Placement::Sharded("flat", {{"data"}}));
    ASSERT_TRUE(info.ok()) << info.status();
    big = info->id;
    running = std::thread([&] {
      in_flight = Collectives(last).AllReduce(big, ReduceOp::kSum).status();
      in_flight_ended = absl::Now();
    });
    absl::SleepFor(absl::Milliseconds(100));
  }
  const absl::Time killed = absl::Now();
  cluster_->Kill(0);
  if (running.joinable()) {
    running.join();
    if (in_flight.ok()) {
      GTEST_LOG_(INFO) << "the running collective finished before the kill";
    } else {
      // It fails (it needs process 0), naming it, within the detection
      // bound (250 ms x 8) plus slack for a loaded machine -- not after the
      // 20 s op timeout.
      EXPECT_EQ(in_flight.code(), absl::StatusCode::kUnavailable) << in_flight;
      EXPECT_THAT(std::string(in_flight.message()), HasSubstr("process 0")) << in_flight;
      EXPECT_LT(in_flight_ended - killed, absl::Seconds(15)) << in_flight;
      if (HasFailure()) {
        for (int p = 1; p < cluster_->size(); ++p) {
          ADD_FAILURE() << "daemon " << p << "'s log:\n" << cluster_->daemon(p).Stderr();
        }
      }
    }
  }
  const absl::Time restarted = absl::Now();
  ASSERT_TRUE(cluster_->Restart(0).ok()) << cluster_->daemon(0).Stderr();
  auto formed = WaitForStatus(*clients_[last], [&](const client::DaemonStatus& s) {
    return s.cluster.state == client::ClusterState::kFormed &&
           s.cluster.epoch > before->cluster.epoch && ProcessIs(s, 0, client::ProcessState::kAlive);
  });
  ASSERT_TRUE(formed.ok()) << formed.status();
  ASSERT_EQ(formed->cluster.state, client::ClusterState::kFormed);
  // The new coordinator's epochs continue above the old ones.
  EXPECT_GT(formed->cluster.epoch, before->cluster.epoch);
  Reconnect();

  // The survivors kept what did not touch process 0, and dropped the rest.
  auto still = Tensors(last).Describe(kept);
  ASSERT_TRUE(still.ok()) << still.status();
  EXPECT_EQ(Tensors(last).Describe(touched).status().code(), absl::StatusCode::kNotFound);
  if (!big.empty()) {
    EXPECT_EQ(Tensors(last).Describe(big).status().code(), absl::StatusCode::kNotFound);
  }
  // The meshes are back on every daemon, the new process 0 included: the
  // survivors register them with the new coordinator as they join it, so
  // they arrive just after the cluster is FORMED (bounded poll).
  client::MeshClient meshes0(*clients_[0]);
  const absl::Time mesh_deadline = absl::Now() + absl::Seconds(20);
  while (absl::Now() < mesh_deadline &&
         !(meshes0.Get("flat").ok() && meshes0.Get("survivors").ok())) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  if (!(meshes0.Get("flat").ok() && meshes0.Get("survivors").ok())) {
    for (int p = 0; p < cluster_->size(); ++p) {
      ADD_FAILURE() << "daemon " << p << "'s log:\n" << cluster_->daemon(p).Stderr();
    }
  }
  ASSERT_TRUE(meshes0.Get("flat").ok());
  ASSERT_TRUE(meshes0.Get("survivors").ok());

  // The first collective after the restart, then 20 of every kind.
  {
    auto sum = Collectives(last).AllReduce(kept, ReduceOp::kSum);
    ASSERT_TRUE(sum.ok()) << sum.status();
    GTEST_LOG_(INFO) << "restart to the first collective on the survivors' devices: "
                     << absl::FormatDuration(absl::Now() - restarted);
    const int64_t blocks = (cluster_->size() - 1) * kDevices;
    std::vector<double> got = Doubles(last, sum->id);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(got[0], 10.0 * blocks * (blocks - 1) / 2);
    ASSERT_TRUE(Tensors(last).Delete({sum->id, kept}).ok());
  }
  for (int i = 0; i < 20; ++i) {
    OneCollective(i);
    if (HasFatalFailure()) return;
    if (i == 0) {
      GTEST_LOG_(INFO) << "restart to the first collective over every daemon: "
                       << absl::FormatDuration(absl::Now() - restarted);
    }
  }
  // Nothing is left behind on any daemon.
  for (int p = 0; p < cluster_->size(); ++p) {
    EXPECT_TRUE(MemoryReturns(*clients_[0], {p}, std::vector<int64_t>(kDevices, 0)))
        << "process " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Restarts, ClusterRestartTest,
                         ::testing::Values(RestartCase{2, false, false},
                                           RestartCase{2, true, false},
                                           RestartCase{3, false, false},
                                           RestartCase{3, true, false}, RestartCase{3, true, true}),
                         CaseName);

}  // namespace
}  // namespace placement::testing
