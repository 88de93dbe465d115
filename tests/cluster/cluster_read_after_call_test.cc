// A multi-controller result is readable on every process once its call
// returned there: each trainer reads the whole reduce-scatter result (its
// shards and the other daemon's) right after its own call, 200 times, while
// two threads keep the CPUs busy; then one trainer deletes each result right
// after its call, 50 times, and every byte comes back. (Before, a daemon committed its part only
// after the done barrier, so a fast reader could ask the other daemon for
// shards it still held pending and get NOT_FOUND, 3 runs in 10 under load.)
#include <atomic>
#include <cstring>
#include <thread>

#include "gtest/gtest.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::HostArray;
using client::Placement;
using client::SourceHandling;

TEST(ClusterReadAfterCallTest, ReduceScatterResultsAreReadableEverywhereWhenTheCallReturns) {
  ClusterOptions options;
  options.num_processes = 2;
  options.devices_per_process = 2;
  options.extra_flags = {"--cluster_op_timeout=20s"};
  auto cluster = ClusterProcesses::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::vector<std::unique_ptr<client::Client>> clients;
  for (int p = 0; p < 2; ++p) {
    auto c = (*cluster)->Connect(p);
    ASSERT_TRUE(c.ok()) << c.status();
    clients.push_back(*std::move(c));
  }
  constexpr int kN = 4;  // devices
  constexpr int64_t kLen = kN * 256;
  client::MeshClient meshes(*clients[1]);
  ASSERT_TRUE(meshes.Create({{"data", kN}}, {.mesh_id = "flat"}).ok());
  // A partial tensor: device d contributes d + i.
  std::vector<std::string> pieces;
  for (int d = 0; d < kN; ++d) {
    std::vector<float> piece(kLen);
    for (int64_t i = 0; i < kLen; ++i) piece[i] = static_cast<float>(d + i);
    auto info = client::TensorClient(*clients[d / 2])
                    .Upload(HostArray::Of(piece, {kLen}), Placement::Device(d));
    ASSERT_TRUE(info.ok()) << info.status();
    pieces.push_back(info->id);
  }
  client::TensorClient tensors0(*clients[0]);
  auto partial = tensors0.Assemble({kLen}, Placement::Sharded("flat", {}).WithPartial({"data"}),
                                   pieces, SourceHandling::kDonate);
  ASSERT_TRUE(partial.ok()) << partial.status();

  std::atomic<bool> stop{false};
  std::vector<std::thread> load;
  for (int i = 0; i < 2; ++i) {
    load.emplace_back([&] {
      volatile uint64_t x = 0;
      while (!stop.load(std::memory_order_relaxed)) x = x * 31 + 7;
    });
  }
  // Trainer p's multi-controller reduce-scatter of `partial` on its daemon.
  auto reduce_scatter = [&](int p, pb::CollectiveResponse* response) {
    auto stub = pb::CollectiveService::NewStub(
        grpc::CreateChannel((*cluster)->address(p), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
    pb::ReduceScatterRequest request;
    request.set_tensor_id(partial->id);
    request.set_op(pb::REDUCE_OP_SUM);
    request.set_scatter_dim(0);
    request.set_controller(pb::CONTROLLER_MULTI);
    return stub->ReduceScatter(&context, request, response);
  };
  int failures = 0;
  for (int round = 0; round < 200 && failures < 5; ++round) {
    std::vector<grpc::Status> called(2);
    std::vector<absl::Status> read(2);
    std::vector<std::vector<float>> values(2);
    std::vector<std::string> ids(2);
    std::vector<std::thread> trainers;
    for (int p = 0; p < 2; ++p) {
      trainers.emplace_back([&, p] {
        pb::CollectiveResponse response;
        called[p] = reduce_scatter(p, &response);
        if (!called[p].ok()) return;
        ids[p] = response.tensor().id();
        // At once, the whole result: this daemon's shards and the other's.
        auto bytes = client::TensorClient(*clients[p]).DownloadBytes(ids[p]);
        read[p] = bytes.status();
        if (bytes.ok()) {
          values[p].resize(bytes->bytes.size() / 4);
          std::memcpy(values[p].data(), bytes->bytes.data(), bytes->bytes.size());
        }
      });
    }
    for (auto& t : trainers) t.join();
    for (int p = 0; p < 2; ++p) {
      SCOPED_TRACE(absl::StrCat("round ", round, ", process ", p));
      if (!called[p].ok()) {
        ADD_FAILURE() << called[p].error_message();
        ++failures;
        continue;
      }
      if (!read[p].ok()) {
        ADD_FAILURE() << "reading the result right after the call: " << read[p];
        ++failures;
        continue;
      }
      ASSERT_EQ(values[p].size(), static_cast<size_t>(kLen));
      EXPECT_EQ(values[p][kLen - 1], kN * (kN - 1) / 2.0f + kN * (kLen - 1));
    }
    EXPECT_EQ(ids[0], ids[1]);
    if (!ids[0].empty()) tensors0.Delete({ids[0]}).IgnoreError();
  }
  // A result deleted by one trainer right after its own call is gone on
  // every daemon: the other daemon deletes it after its commit, not before
  // (which would leave the commit behind, holding device memory).
  for (int round = 0; round < 50 && failures < 5; ++round) {
    std::vector<grpc::Status> called(2);
    absl::Status deleted;
    std::vector<std::thread> trainers;
    for (int p = 0; p < 2; ++p) {
      trainers.emplace_back([&, p] {
        pb::CollectiveResponse response;
        called[p] = reduce_scatter(p, &response);
        if (called[p].ok() && p == 0) {
          deleted = client::TensorClient(*clients[0]).Delete({response.tensor().id()}).status();
        }
      });
    }
    for (auto& t : trainers) t.join();
    SCOPED_TRACE(absl::StrCat("delete round ", round));
    for (int p = 0; p < 2; ++p) {
      if (!called[p].ok()) {
        ADD_FAILURE() << "process " << p << ": " << called[p].error_message();
        ++failures;
      }
    }
    if (!deleted.ok()) {
      ADD_FAILURE() << "deleting the result right after the call: " << deleted;
      ++failures;
    }
  }
  stop = true;
  for (auto& t : load) t.join();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(tensors0.Delete({partial->id}).ok());
  EXPECT_TRUE(MemoryReturns(*clients[0], {}, std::vector<int64_t>(kN, 0)));
}

}  // namespace
}  // namespace placement::testing
