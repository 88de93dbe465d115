// The client library's cluster calls against 2 daemons on loopback (4 CPU
// devices each): loadax's global_to_host_array gives each node its own rows
// (the process index comes from the daemon the client talks to), REPLICATED
// its first local shard, and DataParallel(kMulti).all_reduce_gradients run
// by two "trainers" at once on their own daemons meets once.
#include <cstring>
#include <numeric>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

using ::testing::ElementsAre;
namespace pc = placement::client;

template <typename T>
std::vector<uint8_t> BytesOf(const std::vector<T>& values, size_t from, size_t to) {
  absl::Span<const uint8_t> bytes =
      pc::AsBytes(absl::MakeConstSpan(values).subspan(from, to - from));
  return std::vector<uint8_t>(bytes.begin(), bytes.end());
}

class ClientClusterTest : public ::testing::Test, protected ClusterFixture {
 protected:
  void SetUp() override { StartCluster({2, 4}, {}, /*meshes=*/false); }
};

TEST_F(ClientClusterTest, GlobalToHostArrayGivesEachNodeItsRows) {
  auto mesh = pc::MeshClient(*clients_[0]).Create({{"data", 8}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x(16 * 2);
  std::iota(x.begin(), x.end(), 0.0f);
  // One trainer holds the whole batch: single-controller, no global_name.
  auto batch =
      pc::host_to_global_device_array(*clients_[0], {{"x", pc::HostArray::Of(x, {16, 2})}}, *mesh);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(batch->at("x").info().shards[5].process_index, 1);
  for (int p = 0; p < 2; ++p) {
    auto rows = pc::global_to_host_array(*clients_[p], {{"x", batch->at("x").id()}});
    ASSERT_TRUE(rows.ok()) << rows.status();
    EXPECT_THAT(rows->at("x").header.shape, ElementsAre(8, 2)) << p;
    EXPECT_EQ(rows->at("x").bytes, BytesOf(x, 16 * p, 16 * (p + 1))) << p;
  }
  auto replicated =
      pc::host_to_global_device_array(*clients_[1], {{"x", pc::HostArray::Of(x, {16, 2})}},
                                      mesh->id, pc::DataPartition::kReplicated);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  auto first = pc::global_to_host_array(*clients_[1], *replicated, pc::DataPartition::kReplicated);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->at("x").bytes, BytesOf(x, 0, x.size()));
  EXPECT_TRUE(pc::MeshClient(*clients_[0]).Delete(mesh->id, pc::TensorsOnMesh::kDelete).ok());
}

TEST_F(ClientClusterTest, MultiControllerAllReduceGradientsMeetsOnce) {
  auto mesh = pc::MeshClient(*clients_[0]).Create({{"batch", 8}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> g(8 * 2, 1.0f);
  auto grads =
      pc::TensorClient(*clients_[0])
          .Upload(pc::HostArray::Of(g, {8, 2}), pc::Placement::Sharded(*mesh, {{"batch"}}));
  ASSERT_TRUE(grads.ok()) << grads.status();
  absl::StatusOr<pc::TensorTree> results[2];
  std::vector<std::thread> trainers;
  for (int p = 0; p < 2; ++p) {
    trainers.emplace_back([&, p] {
      pc::DataParallel dp(*clients_[p], pc::Controller::kMulti);
      results[p] = dp.all_reduce_gradients({{"w", grads->id}}, "sum");
    });
  }
  for (std::thread& t : trainers) t.join();
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  ASSERT_TRUE(results[1].ok()) << results[1].status();
  EXPECT_EQ(results[0]->at("w").id(), results[1]->at("w").id());
  auto sum = pc::TensorClient(*clients_[1]).DownloadBytes(results[1]->at("w").id());
  ASSERT_TRUE(sum.ok()) << sum.status();
  std::vector<float> values(sum->bytes.size() / sizeof(float));
  std::memcpy(values.data(), sum->bytes.data(), sum->bytes.size());
  EXPECT_THAT(values, ElementsAre(8, 8));
  EXPECT_TRUE(pc::MeshClient(*clients_[0]).Delete(mesh->id, pc::TensorsOnMesh::kDelete).ok());
}

}  // namespace
}  // namespace placement::testing
