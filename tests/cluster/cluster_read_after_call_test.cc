// A result is readable on every process once its call returned.
//
// Multi-controller: a multi-controller result is readable on every process once its call
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
#include "placement/client/collectives.h"
#include "placement/client/meshes.h"
#include "placement/client/tensors.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/cluster/cluster_test_util.h"
#include "tests/testing/trainer_call.h"

namespace placement::testing {
namespace {

namespace pb = placement::v1;
using client::HostArray;
using client::Placement;
using client::SourceHandling;

// Two daemons with two devices each, a client of each, and mesh "flat"
// over the four devices (made through process 1).
class ClusterReadAfterCallTest : public ::testing::Test {
 protected:
  static constexpr int kN = 4;  // devices, two per process

  void SetUp() override {
    ClusterOptions options;
    options.num_processes = 2;
    options.devices_per_process = 2;
    options.extra_flags = {"--cluster_op_timeout=20s"};
    auto started = ClusterProcesses::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster = *std::move(started);
    for (int p = 0; p < 2; ++p) {
      auto c = cluster->Connect(p);
      ASSERT_TRUE(c.ok()) << c.status();
      clients.push_back(*std::move(c));
    }
    ASSERT_TRUE(client::MeshClient(*clients[1]).Create({{"data", kN}}, {.mesh_id = "flat"}).ok());
  }

  std::unique_ptr<ClusterProcesses> cluster;
  std::vector<std::unique_ptr<client::Client>> clients;
};

// Two threads that keep the CPUs busy while it lives.
class CpuLoad {
 public:
  CpuLoad() {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        volatile uint64_t x = 0;
        while (!stop_.load(std::memory_order_relaxed)) x = x * 31 + 7;
      });
    }
  }
  ~CpuLoad() {
    stop_ = true;
    for (auto& t : threads_) t.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
};

TEST_F(ClusterReadAfterCallTest, ReduceScatterResultsAreReadableEverywhereWhenTheCallReturns) {
  constexpr int64_t kLen = kN * 256;
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

  auto load = std::make_unique<CpuLoad>();
  // Trainer p's multi-controller reduce-scatter of `partial` on its daemon.
  auto reduce_scatter = [&](int p, pb::CollectiveResponse* response) {
    auto stub = pb::CollectiveService::NewStub(
        grpc::CreateChannel(cluster->address(p), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    PrepareTrainerCall(&context, absl::Seconds(60));
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
  load.reset();
  EXPECT_EQ(failures, 0);
  ASSERT_TRUE(tensors0.Delete({partial->id}).ok());
  EXPECT_TRUE(MemoryReturns(*clients[0], {}, std::vector<int64_t>(kN, 0)));
}

// A single-controller call's results are usable on every participant once
// the driver returned them: the other participant installed its part when
// its part ended (presumed commit), so there is no commit round for a
// reader to outrun. 150 all-reduces driven by process 0, each result used
// on process 1 at once -- read, deleted, or resharded and reduced again with
// process 1 driving -- and 50 with the input donated; every value checked, the
// tensor lists agree and every byte comes back.
TEST_F(ClusterReadAfterCallTest, SingleControllerResultsAreUsableOnTheOtherParticipantAtOnce) {
  constexpr int64_t kLen = kN * 1024;
  std::vector<float> ones(kLen, 1.0f);
  client::TensorClient tensors0(*clients[0]), tensors1(*clients[1]);
  client::CollectiveClient collectives0(*clients[0]), collectives1(*clients[1]);
  // Ones sharded over the 4 devices: an all-reduce over 'data' sums the
  // four shards, 4s.
  const Placement sharded = Placement::Sharded("flat", {{"data"}});
  auto x = tensors0.Upload(HostArray::Of(ones, {kLen}), sharded);
  ASSERT_TRUE(x.ok()) << x.status();

  auto load = std::make_unique<CpuLoad>();
  auto values_of = [](const client::TensorClient& via, const std::string& id) {
    std::vector<float> out;
    auto bytes = via.DownloadBytes(id);
    if (!bytes.ok()) {
      ADD_FAILURE() << "reading " << id << ": " << bytes.status();
      return out;
    }
    out.resize(bytes->bytes.size() / 4);
    std::memcpy(out.data(), bytes->bytes.data(), bytes->bytes.size());
    return out;
  };
  int failures = 0;
  for (int round = 0; round < 200 && failures < 5; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    const bool donate = round >= 150;
    std::string input = x->id;
    if (donate) {
      auto copy = tensors0.Place(x->id, sharded);
      ASSERT_TRUE(copy.ok()) << copy.status();
      input = copy->id;
    }
    client::CollectiveOptions sum;
    if (donate) sum.source = SourceHandling::kDonate;
    auto reduced = collectives0.AllReduce(input, "sum", sum);
    if (!reduced.ok()) {
      ADD_FAILURE() << "driven by process 0: " << reduced.status();
      ++failures;
      continue;
    }
    std::string last = reduced->id;
    switch (donate ? 0 : round % 3) {
      case 0: {  // read on process 1: its shards and process 0's
        std::vector<float> got = values_of(tensors1, reduced->id);
        if (got.empty() || got.front() != 4.0f || got.back() != 4.0f) {
          ADD_FAILURE() << "process 1 read " << got.size() << " values, first "
                        << (got.empty() ? -1.0f : got.front());
          ++failures;
        }
        break;
      }
      case 1: {  // deleted through process 1
        absl::Status deleted = tensors1.Delete({reduced->id}).status();
        if (!deleted.ok()) {
          ADD_FAILURE() << "deleting through process 1: " << deleted;
          ++failures;
        }
        last.clear();
        break;
      }
      case 2: {  // sharded and reduced again, process 1 driving both
        auto resharded = tensors1.Place(reduced->id, sharded, SourceHandling::kDonate);
        if (!resharded.ok()) {
          ADD_FAILURE() << "placed by process 1: " << resharded.status();
          ++failures;
          break;
        }
        last = resharded->id;
        client::CollectiveOptions again;
        again.source = SourceHandling::kDonate;
        auto twice = collectives1.AllReduce(resharded->id, "sum", again);
        if (!twice.ok()) {
          ADD_FAILURE() << "driven by process 1: " << twice.status();
          ++failures;
          break;
        }
        last = twice->id;
        std::vector<float> got = values_of(tensors0, twice->id);
        if (got.empty() || got.front() != 16.0f) {
          ADD_FAILURE() << "process 0 read " << (got.empty() ? -1.0f : got.front());
          ++failures;
        }
        break;
      }
    }
    if (!last.empty()) tensors0.Delete({last}).IgnoreError();
  }
  load.reset();
  EXPECT_EQ(failures, 0);
  // Both daemons know the same tensors: the input alone.
  for (const client::TensorClient* via : {&tensors0, &tensors1}) {
    auto listed = via->List();
    ASSERT_TRUE(listed.ok()) << listed.status();
    EXPECT_EQ(listed->size(), 1u);
  }
  ASSERT_TRUE(tensors0.Delete({x->id}).ok());
  EXPECT_TRUE(MemoryReturns(*clients[0], {}, std::vector<int64_t>(kN, 0)));
}

}  // namespace
}  // namespace placement::testing
