// DONATE in a cluster: a donating call takes its input only when nothing
// else holds it, so the daemon must not keep its own reference to the input
// while it runs the call (found by bench/cluster_bench --source=donate).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "placement/client/collectives.h"
#include "placement/client/placement.h"
#include "tests/testing/cluster_processes.h"

namespace placement::testing {
namespace {

namespace pc = ::placement::client;

class ClusterDonateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClusterOptions options;
    options.num_processes = 2;
    options.devices_per_process = 1;
    auto cluster = ClusterProcesses::Start(options);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    auto client = cluster_->Connect(0);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  std::string Upload(const pc::Mesh& mesh) {
    const std::vector<float> values(8, 1.0f);
    auto info = pc::TensorClient(*client_).Upload(pc::HostArray::Of(values, {8}),
                                                  pc::Placement::Sharded(mesh, {{"data"}}));
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->id : "";
  }

  std::unique_ptr<ClusterProcesses> cluster_;
  std::unique_ptr<pc::Client> client_;
};

TEST_F(ClusterDonateTest, DisassemblesATensorSpanningDaemonsWithDonation) {
  auto mesh = pc::MeshClient(*client_).Create({{"data", 2}}, {.device_ids = {0, 1}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  pc::TensorClient tensors(*client_);
  const std::string id = Upload(*mesh);
  auto pieces = tensors.Disassemble(id, pc::SourceHandling::kDonate);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_EQ(pieces->size(), 2u);
  EXPECT_EQ(tensors.Describe(id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClusterDonateTest, DonatesToACollectiveOnOneDaemonOfACluster) {
  auto mesh = pc::MeshClient(*client_).Create({{"data", 1}}, {.device_ids = {0}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  const std::string id = Upload(*mesh);
  auto reduced = pc::CollectiveClient(*client_).AllReduce(
      id, pc::ReduceOp::kSum, {.axes = {"data"}, .source = pc::SourceHandling::kDonate});
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  EXPECT_EQ(pc::TensorClient(*client_).Describe(id).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace placement::testing
