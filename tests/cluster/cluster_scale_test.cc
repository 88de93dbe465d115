// A cluster past the coordinator's old 64 waiting threads, with real
// daemons on loopback (1 CPU device each): 128 daemons form a cluster, a
// barrier of all 128 completes at the coordinator (every arrival waits
// there at once), and a multi-controller upload over 100 processes -- each
// process's "trainer" uploads its row to its own daemon -- commits with the
// global array's bytes.
#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/v1/cluster_service.grpc.pb.h"
#include "placement/v1/mesh_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/testing/trainer_call.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;

constexpr int kProcesses = 128;
constexpr int kUploaders = 100;
constexpr int kRow = 4;  // f32 elements each process uploads

std::chrono::system_clock::time_point In(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

class ClusterScaleTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.num_processes = kProcesses;
    options.devices_per_process = 1;
    options.device_memory = int64_t{4} << 20;
    // Slow beats: 128 daemons beating every 250 ms would load 2 cores.
    options.heartbeat_interval = absl::Seconds(1);
    options.heartbeat_misses = 30;
    options.start_timeout = absl::Seconds(240);
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = cluster->release();
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static ClusterProcesses* cluster_;
};

ClusterProcesses* ClusterScaleTest::cluster_ = nullptr;

TEST_F(ClusterScaleTest, EveryDaemonSeesTheFormedCluster) {
  ASSERT_NE(cluster_, nullptr);
  for (int i : {0, 64, kProcesses - 1}) {
    auto client = cluster_->Connect(i);
    ASSERT_TRUE(client.ok()) << client.status();
    auto status = WaitForStatus(**client, [](const client::DaemonStatus& s) {
      return s.cluster.state == client::ClusterState::kFormed;
    });
    ASSERT_TRUE(status.ok()) << status.status();
    EXPECT_EQ(status->cluster.state, client::ClusterState::kFormed) << "daemon " << i;
    EXPECT_EQ(status->cluster.processes.size(), static_cast<size_t>(kProcesses));
    EXPECT_EQ(status->num_devices, kProcesses);
  }
}

TEST_F(ClusterScaleTest, ABarrierOfAll128Completes) {
  ASSERT_NE(cluster_, nullptr);
  auto stub = pb::ClusterService::NewStub(
      grpc::CreateChannel(cluster_->coordinator(), grpc::InsecureChannelCredentials()));
  struct Call {
    grpc::ClientContext context;
    pb::BarrierRequest request;
    pb::BarrierResponse response;
    grpc::Status status;
  };
  std::vector<std::unique_ptr<Call>> calls;
  std::atomic<int> done{0};
  absl::Notification all;
  for (int p = 0; p < kProcesses; ++p) {
    auto call = std::make_unique<Call>();
    call->context.set_deadline(In(absl::Seconds(60)));
    call->request.set_barrier_id("scale/all");
    call->request.set_process_index(p);
    call->request.set_payload(absl::StrCat("p", p));
    call->request.mutable_timeout()->set_seconds(60);
    Call* c = call.get();
    stub->async()->Barrier(&c->context, &c->request, &c->response, [&, c](grpc::Status s) {
      c->status = std::move(s);
      if (++done == kProcesses) all.Notify();
    });
    calls.push_back(std::move(call));
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(90)));
  for (int p = 0; p < kProcesses; ++p) {
    const Call& c = *calls[p];
    ASSERT_TRUE(c.status.ok()) << "process " << p << ": " << c.status.error_message();
    EXPECT_EQ(c.response.token(), calls[0]->response.token());
    ASSERT_EQ(c.response.payloads_size(), kProcesses);
    EXPECT_EQ(c.response.payloads(p), absl::StrCat("p", p));
  }
}

TEST_F(ClusterScaleTest, AMultiControllerUploadOver100ProcessesCommits) {
  ASSERT_NE(cluster_, nullptr);
  // A mesh over the devices of processes 0..99 (one each), made once on
  // process 0: meshes are cluster-wide.
  {
    auto meshes = pb::MeshService::NewStub(
        grpc::CreateChannel(cluster_->address(0), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(In(absl::Seconds(60)));
    pb::CreateMeshRequest request;
    request.set_mesh_id("rows");
    pb::MeshAxis* axis = request.mutable_axes()->add_axes();
    axis->set_name("x");
    axis->set_size(kUploaders);
    for (int d = 0; d < kUploaders; ++d) request.add_device_ids(d);
    pb::CreateMeshResponse response;
    grpc::Status s = meshes->CreateMesh(&context, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::vector<grpc::Status> statuses(kUploaders);
  std::vector<pb::UploadResponse> responses(kUploaders);
  std::vector<std::thread> trainers;
  for (int p = 0; p < kUploaders; ++p) {
    trainers.emplace_back([&, p] {
      auto stub = pb::TensorService::NewStub(
          grpc::CreateChannel(cluster_->address(p), grpc::InsecureChannelCredentials()));
      grpc::ClientContext context;
      PrepareTrainerCall(&context, absl::Seconds(120));
      auto writer = stub->Upload(&context, &responses[p]);
      pb::UploadRequest header;
      pb::UploadHeader* h = header.mutable_header();
      h->set_dtype(pb::DTYPE_F32);
      h->add_shape(1);
      h->add_shape(kRow);
      pb::Sharding* sharding = h->mutable_rule()->mutable_placement()->mutable_sharding();
      sharding->set_mesh_id("rows");
      sharding->mutable_spec()->add_dims()->add_axes("x");
      sharding->mutable_spec()->add_dims();
      h->mutable_process_local()->set_global_name("scale/rows");
      h->mutable_process_local()->mutable_timeout()->set_seconds(100);
      writer->Write(header);
      std::vector<float> row(kRow);
      for (int j = 0; j < kRow; ++j) row[j] = static_cast<float>(p * kRow + j);
      pb::UploadRequest chunk;
      chunk.set_chunk(std::string(reinterpret_cast<const char*>(row.data()), sizeof(float) * kRow));
      writer->Write(chunk);
      writer->WritesDone();
      statuses[p] = writer->Finish();
    });
  }
  for (auto& t : trainers) t.join();
  for (int p = 0; p < kUploaders; ++p) {
    ASSERT_TRUE(statuses[p].ok()) << "process " << p << ": " << statuses[p].error_message();
    EXPECT_EQ(responses[p].tensor().id(), responses[0].tensor().id());
  }
  // Any daemon assembles the whole array from the 100 daemons' shards.
  auto tensors = pb::TensorService::NewStub(
      grpc::CreateChannel(cluster_->address(kProcesses - 1), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  context.set_deadline(In(absl::Seconds(60)));
  pb::DownloadRequest request;
  request.set_tensor_id(responses[0].tensor().id());
  auto reader = tensors->Download(&context, request);
  std::string bytes;
  pb::DownloadResponse part;
  while (reader->Read(&part)) {
    if (part.has_chunk()) bytes += part.chunk();
  }
  grpc::Status s = reader->Finish();
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(bytes.size(), sizeof(float) * kUploaders * kRow);
  std::vector<float> global(kUploaders * kRow);
  std::memcpy(global.data(), bytes.data(), bytes.size());
  for (int i = 0; i < kUploaders * kRow; ++i) ASSERT_EQ(global[i], static_cast<float>(i)) << i;
}

}  // namespace
}  // namespace placement::testing
