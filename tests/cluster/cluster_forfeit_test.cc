// A collective that one daemon cannot run (its result does not fit on its
// devices) fails everywhere at once, not after --cluster_op_timeout: the
// daemon that failed before reaching Gloo forfeits its ticket, closing the
// set's Gloo connections, so the peers already inside the operation fail
// too (ClusterEngine::Forfeit). The caller learns the cause, device memory
// goes back to baseline everywhere, and the next collective of the set runs
// on a fresh generation -- also without --cluster_check_collectives for a
// call whose groups leave a daemon apart. Real daemons on loopback, real
// Gloo.
#include <thread>

#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::HostArray;
using client::Placement;
using ::testing::HasSubstr;

// 3 daemons x 2 devices; process 1's devices hold 6 MiB, the others' 64.
// The input's shards are 4 MiB, so process 1 can hold an input shard but
// not a result shard beside it.
constexpr int64_t kColumns = int64_t{1} << 20;  // f32: 4 MiB per row
// Far above what any call here may take: without forfeiting, the peers
// would wait this long inside Gloo.
constexpr char kOpTimeout[] = "--cluster_op_timeout=120s";
constexpr absl::Duration kBound = absl::Seconds(20);

// Three daemons of two CPU devices (64 MiB each) but daemon `small`, whose
// devices hold 6 MiB, and a client of daemon 0. The CPU platform: the
// budgets are sized in its bytes (a CUDA block is 2 MiB); the forfeit
// itself is the platform's transport's.
class ThreeDaemonsOneSmall : public ::testing::Test {
 protected:
  void StartCluster(int small, std::vector<std::string> flags) {
    ClusterOptions options;
    options.num_processes = 3;
    options.devices_per_process = 2;
    options.device_memory = int64_t{64} << 20;
    options.extra_flags = std::move(flags);
    options.extra_flags.push_back("--backend=cpu");
    options.per_process.resize(3);
    options.per_process[small] = {absl::StrCat("--cpu_device_memory=", int64_t{6} << 20)};
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto c = cluster_->Connect(0);
    ASSERT_TRUE(c.ok());
    client_ = *std::move(c);
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::unique_ptr<client::Client> client_;
};

class ClusterForfeitTest : public ThreeDaemonsOneSmall {
 protected:
  // More daemon flags (the checked variant below).
  virtual std::vector<std::string> MoreFlags() const { return {}; }

  void SetUp() override {
    std::vector<std::string> flags = MoreFlags();
    flags.push_back(kOpTimeout);
    StartCluster(/*small=*/1, std::move(flags));
    if (HasFatalFailure()) return;
    client::MeshClient meshes(*client_);
    ASSERT_TRUE(meshes.Create({{"data", 6}}, {.mesh_id = "flat"}).ok());
  }

  // A [6, columns] f32 tensor of ones, one row per device.
  client::TensorInfo Upload(int64_t columns) {
    client::TensorClient tensors(*client_);
    std::vector<float> values(6 * columns, 1.f);
    auto info =
        tensors.Upload(HostArray::Of(values, {6, columns}), Placement::Sharded("flat", {{"data"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : client::TensorInfo();
  }

  // A single-controller all-reduce of `id` that must succeed: every
  // element is 6.
  void ExpectSumWorks(const std::string& id, int64_t columns) {
    client::CollectiveClient collectives(*client_);
    auto sum = collectives.AllReduce(id, client::ReduceOp::kSum);
    ASSERT_TRUE(sum.ok()) << sum.status();
    std::vector<float> got(columns);
    client::TensorClient tensors(*client_);
    ASSERT_TRUE(tensors.Download(sum->id, client::AsWritableBytes(got)).ok());
    EXPECT_EQ(got.front(), 6.f);
    EXPECT_EQ(got.back(), 6.f);
    ASSERT_TRUE(tensors.Delete({sum->id}).ok());
  }

  // A single-controller all-reduce of `id` that process 1 cannot hold.
  void ExpectSumFailsAtOnce(const std::string& id) {
    client::CollectiveClient collectives(*client_);
    const absl::Time start = absl::Now();
    auto sum = collectives.AllReduce(id, client::ReduceOp::kSum);
    const absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(sum.ok());
    // The cause, not the peers' broken connections.
    EXPECT_EQ(sum.status().code(), absl::StatusCode::kResourceExhausted) << sum.status();
    EXPECT_LT(took, kBound) << sum.status();
  }

  // Every trainer calls a multi-controller all-reduce that process 1
  // cannot hold: it gets RESOURCE_EXHAUSTED, the others ABORTED naming it,
  // all well before the operation timeout; memory returns and the next
  // call runs.
  void ExpectTrainersLearnWhichProcessFailed() {
    client::TensorInfo big = Upload(kColumns);
    client::TensorInfo small = Upload(4);
    ExpectSumWorks(small.id, 4);  // contexts connected
    const std::vector<int64_t> with_inputs = MemoryOf(*client_);

    std::vector<grpc::Status> statuses(3);
    std::vector<absl::Duration> took(3);
    std::vector<std::thread> trainers;
    for (int p = 0; p < 3; ++p) {
      trainers.emplace_back([&, p] {
        pb::AllReduceRequest request;
        request.set_tensor_id(big.id);
        request.set_controller(pb::CONTROLLER_MULTI);
        pb::CollectiveResponse response;
        const absl::Time start = absl::Now();
        statuses[p] = AllReduceOn(cluster_->address(p), request, &response, absl::Seconds(100));
        took[p] = absl::Now() - start;
      });
    }
    for (auto& t : trainers) t.join();
    EXPECT_EQ(statuses[1].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
        << statuses[1].error_message();
    for (int p : {0, 2}) {
      EXPECT_EQ(statuses[p].error_code(), grpc::StatusCode::ABORTED) << statuses[p].error_message();
      EXPECT_THAT(statuses[p].error_message(), HasSubstr("process 1 failed its part"));
      EXPECT_THAT(statuses[p].error_message(), HasSubstr("RESOURCE_EXHAUSTED"));
    }
    for (int p = 0; p < 3; ++p) EXPECT_LT(took[p], kBound) << "process " << p;
    EXPECT_TRUE(MemoryReturns(*client_, {}, with_inputs));
    ExpectSumWorks(small.id, 4);
  }
};

TEST_F(ClusterForfeitTest, SingleControllerFailsEverywhereAtOnceThenRecovers) {
  const std::vector<int64_t> baseline = MemoryOf(*client_);
  client::TensorInfo big = Upload(kColumns);
  client::TensorInfo small = Upload(4);
  const std::vector<int64_t> with_inputs = MemoryOf(*client_);

  // The set's first collective: process 1 never connected a Gloo context
  // (the others wait in the rendezvous for it).
  ExpectSumFailsAtOnce(big.id);
  EXPECT_TRUE(MemoryReturns(*client_, {}, with_inputs));
  // The next one runs on a new generation's context.
  ExpectSumWorks(small.id, 4);
  // Now the context is connected everywhere: the others wait inside the
  // Gloo operation.
  ExpectSumFailsAtOnce(big.id);
  EXPECT_TRUE(MemoryReturns(*client_, {}, with_inputs));
  ExpectSumWorks(small.id, 4);

  client::TensorClient tensors(*client_);
  ASSERT_TRUE(tensors.Delete({big.id, small.id}).ok());
  EXPECT_TRUE(MemoryReturns(*client_, {}, baseline));
}

// A multi-controller all-gather, DONATE, over the devices of processes 0
// and 1, whose result process 1 cannot hold: the call fails, and its input
// -- consumed, as a donated input that fails mid-way is -- goes on every
// daemon, also from daemon 2, which holds its record but none of its
// shards (before, the participants deleted their own copies only, and
// daemon 2 listed the input for good).
TEST_F(ClusterForfeitTest, AFailedDonatingCollectiveConsumesItsInputEverywhere) {
  client::MeshClient meshes(*client_);
  ASSERT_TRUE(meshes.Create({{"data", 4}}, {.mesh_id = "pair", .device_ids = {0, 1, 2, 3}}).ok());
  const std::vector<int64_t> baseline = MemoryOf(*client_);
  client::TensorClient tensors(*client_);
  std::vector<float> values(4 * kColumns, 1.f);
  auto input =
      tensors.Upload(HostArray::Of(values, {4, kColumns}), Placement::Sharded("pair", {{"data"}}));
  ASSERT_TRUE(input.ok()) << input.status();
  std::vector<grpc::Status> statuses(2);
  std::vector<std::thread> trainers;
  for (int p = 0; p < 2; ++p) {
    trainers.emplace_back([&, p] {
      pb::AllGatherRequest request;
      request.set_tensor_id(input->id);
      request.set_dim(0);
      request.set_source(pb::SOURCE_HANDLING_DONATE);
      request.set_controller(pb::CONTROLLER_MULTI);
      pb::CollectiveResponse response;
      auto stub = pb::CollectiveService::NewStub(
          grpc::CreateChannel(cluster_->address(p), grpc::InsecureChannelCredentials()));
      grpc::ClientContext context;
      PrepareTrainerCall(&context, absl::Seconds(100));
      statuses[p] = stub->AllGather(&context, request, &response);
    });
  }
  for (auto& t : trainers) t.join();
  EXPECT_EQ(statuses[1].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << statuses[1].error_message();
  EXPECT_FALSE(statuses[0].ok());
  for (int p = 0; p < 3; ++p) {
    auto c = cluster_->Connect(p);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(client::TensorClient(**c).Describe(input->id).status().code(),
              absl::StatusCode::kNotFound)
        << "process " << p;
  }
  EXPECT_TRUE(MemoryReturns(*client_, {}, baseline));
}

// Groups that each leave a daemon out (the "y" axis of a 2 x 3 grid over
// the 3 daemons: devices of processes 0,1 and of 1,2): process 1 fails its
// part before it reaches either group, so its peers wait for it in
// rendezvous it never joins. It says in the coordinator's store that it
// gave the generation up, and their waits end there (before, they lasted
// --cluster_op_timeout, 120 s here).
TEST_F(ClusterForfeitTest, PeersWaitingInAGroupTheFailingDaemonNeverJoinedFailAtOnce) {
  client::MeshClient meshes(*client_);
  ASSERT_TRUE(meshes.Create({{"x", 2}, {"y", 3}}, {.mesh_id = "grid"}).ok());
  client::TensorClient tensors(*client_);
  // [3, 2 x columns] ones, a [1, columns] block per device: the sum of
  // dimension 0's blocks over "y" is [1, 2 x columns] of 3s, a block on
  // every device.
  auto upload = [&](int64_t columns) {
    std::vector<float> values(6 * columns, 1.f);
    auto info = tensors.Upload(HostArray::Of(values, {3, 2 * columns}),
                               Placement::Sharded("grid", {{"y"}, {"x"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : client::TensorInfo();
  };
  client::TensorInfo big = upload(kColumns);
  client::TensorInfo small = upload(4);
  const std::vector<int64_t> with_inputs = MemoryOf(*client_);
  client::CollectiveClient collectives(*client_);
  const absl::Time start = absl::Now();
  auto sum = collectives.AllReduce(big.id, client::ReduceOp::kSum, {.axes = {"y"}});
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(sum.ok());
  EXPECT_EQ(sum.status().code(), absl::StatusCode::kResourceExhausted) << sum.status();
  EXPECT_LT(took, kBound) << sum.status();
  EXPECT_TRUE(MemoryReturns(*client_, {}, with_inputs));
  // The set's next generation runs, and the key it left is gone then.
  auto ok = collectives.AllReduce(small.id, client::ReduceOp::kSum, {.axes = {"y"}});
  ASSERT_TRUE(ok.ok()) << ok.status();
  std::vector<float> got(8);
  ASSERT_TRUE(tensors.Download(ok->id, client::AsWritableBytes(got)).ok());
  EXPECT_THAT(got, ::testing::Each(3.f));
  ASSERT_TRUE(tensors.Delete({ok->id, big.id, small.id}).ok());
}

TEST_F(ClusterForfeitTest, MultiControllerTrainersLearnWhichProcessFailed) {
  // Unchecked (the default): process 1 forfeits, closing the connections.
  ExpectTrainersLearnWhichProcessFailed();
}

// With --cluster_check_collectives the failing part says so in the call's
// word exchange and nobody runs the collective.
class CheckedClusterForfeitTest : public ClusterForfeitTest {
 protected:
  std::vector<std::string> MoreFlags() const override { return {"--cluster_check_collectives"}; }
};

TEST_F(CheckedClusterForfeitTest, MultiControllerTrainersLearnWhichProcessFailed) {
  ExpectTrainersLearnWhichProcessFailed();
}

// --cluster_check_collectives=false, and calls whose groups leave a daemon
// apart: on mesh {x: 2, y: 3} over devices 0..5 (daemon p holds 2p, 2p+1),
// an all-reduce over "y" runs in groups {0,1,2} (daemons 0, 1) and {3,4,5}
// (daemons 1, 2), so daemons 0 and 2 share none. Daemon 2's devices hold 6
// MiB: it holds a 4 MiB input shard but not a result beside it. Run alone,
// its forfeit would never reach daemon 0, whose call would succeed while
// the others fail; such a call is checked all the same, so every trainer
// fails it and the set's next calls run everywhere.
class UncheckedPartialGroupsTest : public ThreeDaemonsOneSmall {
 protected:
  void SetUp() override {
    StartCluster(/*small=*/2, {"--cluster_op_timeout=30s", "--cluster_check_collectives=false"});
    if (HasFatalFailure()) return;
    client::MeshClient meshes(*client_);
    ASSERT_TRUE(
        meshes.Create({{"x", 2}, {"y", 3}}, {.mesh_id = "xy", .device_ids = {0, 1, 2, 3, 4, 5}})
            .ok());
  }

  // A [3, columns] f32 tensor whose row j is j + 1, rows sharded over "y"
  // (replicated over "x").
  client::TensorInfo Upload(int64_t columns) {
    client::TensorClient tensors(*client_);
    std::vector<float> values(3 * columns);
    for (int64_t i = 0; i < 3 * columns; ++i) values[i] = static_cast<float>(i / columns + 1);
    auto info =
        tensors.Upload(HostArray::Of(values, {3, columns}), Placement::Sharded("xy", {{"y"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : client::TensorInfo();
  }

  // Every daemon's trainer asks for a multi-controller all-reduce of `id`
  // over "y" at once.
  std::vector<grpc::Status> MultiSum(const std::string& id,
                                     std::vector<pb::CollectiveResponse>& responses) {
    std::vector<grpc::Status> statuses(3);
    responses.assign(3, pb::CollectiveResponse());
    std::vector<std::thread> trainers;
    for (int p = 0; p < 3; ++p) {
      trainers.emplace_back([&, p] {
        pb::AllReduceRequest request;
        request.set_tensor_id(id);
        request.add_axes("y");
        request.set_controller(pb::CONTROLLER_MULTI);
        statuses[p] = AllReduceOn(cluster_->address(p), request, &responses[p], absl::Seconds(100));
      });
    }
    for (auto& t : trainers) t.join();
    return statuses;
  }

  // A multi-controller sum of `id` that must succeed everywhere: one row of
  // 1 + 2 + 3.
  void ExpectMultiSumWorks(const std::string& id, int64_t columns) {
    std::vector<pb::CollectiveResponse> responses;
    std::vector<grpc::Status> statuses = MultiSum(id, responses);
    for (int p = 0; p < 3; ++p) {
      ASSERT_TRUE(statuses[p].ok()) << "process " << p << ": " << statuses[p].error_message();
      EXPECT_EQ(responses[p].tensor().id(), responses[0].tensor().id());
    }
    client::TensorClient tensors(*client_);
    std::vector<float> got(columns);
    ASSERT_TRUE(tensors.Download(responses[0].tensor().id(), client::AsWritableBytes(got)).ok());
    EXPECT_EQ(got.front(), 6.f);
    EXPECT_EQ(got.back(), 6.f);
    ASSERT_TRUE(tensors.Delete({responses[0].tensor().id()}).ok());
  }
};

TEST_F(UncheckedPartialGroupsTest, APartThatFailsFirstFailsTheCallOnEveryDaemon) {
  client::TensorInfo big = Upload(kColumns);
  client::TensorInfo small = Upload(4);
  ExpectMultiSumWorks(small.id, 4);  // the set formed; a steady-state call next
  const std::vector<int64_t> with_inputs = MemoryOf(*client_);

  std::vector<pb::CollectiveResponse> responses;
  std::vector<grpc::Status> statuses = MultiSum(big.id, responses);
  EXPECT_EQ(statuses[2].error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << statuses[2].error_message();
  for (int p : {0, 1}) {
    EXPECT_EQ(statuses[p].error_code(), grpc::StatusCode::ABORTED)
        << "process " << p << ": " << statuses[p].error_message();
    EXPECT_THAT(statuses[p].error_message(), HasSubstr("process 2 failed its part"));
    EXPECT_THAT(statuses[p].error_message(), HasSubstr("RESOURCE_EXHAUSTED"));
  }
  EXPECT_TRUE(MemoryReturns(*client_, {}, with_inputs));
  // Every daemon failed that call: they form the set again together, and
  // call after call runs everywhere.
  ExpectMultiSumWorks(small.id, 4);
  ExpectMultiSumWorks(small.id, 4);
}

}  // namespace
}  // namespace placement::testing
