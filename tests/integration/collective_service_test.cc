// CollectiveService against a real placementd (CPU backend, 8 virtual
// devices): every RPC through the client library, bad inputs with precise
// codes, cancellation and deletion mid-collective, 8 concurrent clients on
// different meshes. The fixture checks device memory returns to its
// baseline after every test.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <functional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "placement/client/collectives.h"
#include "placement/v1/collective_service.grpc.pb.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;
using ::testing::HasSubstr;

class CollectiveServiceTest : public ClientDaemonTest {
 protected:
  void SetUp() override {
    ClientDaemonTest::SetUp();
    collectives_ = std::make_unique<CollectiveClient>(*client_);
  }

  // A tensor partial over `axes` of `mesh` (spec P()): device position p
  // contributes value(p, i) for element i. Built from single-device uploads
  // assembled with donation, as a trainer does with per-device gradients.
  absl::StatusOr<TensorInfo> Partial(const TensorClient& tensors, const Mesh& mesh,
                                     const std::vector<int64_t>& shape,
                                     const std::vector<std::string>& axes,
                                     const std::function<float(int, int64_t)>& value,
                                     ReduceOp op = ReduceOp::kSum) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<std::string> ids;
    for (int p = 0; p < mesh.device_ids.size(); ++p) {
      std::vector<float> piece(n);
      for (int64_t i = 0; i < n; ++i) piece[i] = value(p, i);
      auto info =
          tensors.Upload(HostArray::Of(piece, shape), Placement::Device(mesh.device_ids[p]));
      if (!info.ok()) return info.status();
      ids.push_back(info->id);
    }
    return tensors.Assemble(shape, Placement::Sharded(mesh, {}).WithPartial(axes, op), ids,
                            SourceHandling::kDonate);
  }

  std::vector<float> Floats(const std::string& id, int64_t n) {
    std::vector<float> out(n);
    auto header = tensors_->Download(id, AsWritableBytes(out));
    EXPECT_TRUE(header.ok()) << header.status();
    return out;
  }

  std::unique_ptr<CollectiveClient> collectives_;
};

TEST_F(CollectiveServiceTest, AllReducePartialMeanAndSum) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto grads = Partial(*tensors_, *mesh, {4, 3}, {"data"}, [](int p, int64_t i) { return p + i; });
  ASSERT_TRUE(grads.ok()) << grads.status();
  EXPECT_EQ(grads->sharding.partial_axes.size(), 1u);

  auto mean = collectives_->AllReduce(grads->id, "mean", {.axes = {"data"}, .name = "g-mean"});
  ASSERT_TRUE(mean.ok()) << mean.status();
  EXPECT_EQ(mean->name, "g-mean");
  EXPECT_EQ(mean->sharding.partial_axes.size(), 0u);
  EXPECT_EQ(mean->shards.size(), 8u);
  std::vector<float> got = Floats(mean->id, 12);
  for (int64_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(got[i], 3.5f + i);

  // The enum form, defaulting to every mesh axis; donation reduces in place.
  auto sum =
      collectives_->AllReduce(grads->id, ReduceOp::kSum, {.source = SourceHandling::kDonate});
  ASSERT_TRUE(sum.ok()) << sum.status();
  got = Floats(sum->id, 12);
  for (int64_t i = 0; i < 12; ++i) EXPECT_FLOAT_EQ(got[i], 28.0f + 8 * i);
  EXPECT_EQ(tensors_->Describe(grads->id).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CollectiveServiceTest, AllReduceShardedBlocksAndAllGather) {
  auto mesh = meshes_->Create({{"data", 2}, {"model", 4}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x(16 * 3);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i);
  auto sharded =
      tensors_->Upload(HostArray::Of(x, {16, 3}), Placement::Sharded(*mesh, {{"data", "model"}}));
  ASSERT_TRUE(sharded.ok()) << sharded.status();

  // One block of 2 rows per device, summed: shape [2, 3].
  auto blocks = collectives_->AllReduce(sharded->id, ReduceOp::kSum);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_THAT(blocks->shape, ::testing::ElementsAre(2, 3));
  std::vector<float> got = Floats(blocks->id, 6);
  for (int64_t i = 0; i < 6; ++i) {
    float want = 0;
    for (int k = 0; k < 8; ++k) want += x[k * 6 + i];
    EXPECT_FLOAT_EQ(got[i], want);
  }

  // Gather the minor-most axis, then the rest.
  auto half = collectives_->AllGather(sharded->id, 0, {.axes = {"model"}});
  ASSERT_TRUE(half.ok()) << half.status();
  ASSERT_EQ(half->sharding.spec[0].size(), 1u);
  EXPECT_EQ(half->sharding.spec[0][0], "data");
  auto full = collectives_->AllGather(half->id, 0, {.source = SourceHandling::kDonate});
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(Floats(full->id, 48), x);
  EXPECT_EQ(tensors_->Describe(half->id).status().code(), absl::StatusCode::kNotFound);

  // Dimension 1 (not contiguous in a shard): staged inside the daemon.
  auto cols =
      tensors_->Upload(HostArray::Of(x, {4, 12}), Placement::Sharded(*mesh, {{}, {"model"}}));
  ASSERT_TRUE(cols.ok()) << cols.status();
  auto gathered = collectives_->AllGather(cols->id, -1);
  ASSERT_TRUE(gathered.ok()) << gathered.status();
  EXPECT_EQ(Floats(gathered->id, 48), x);
}

TEST_F(CollectiveServiceTest, ReduceScatterAndBroadcast) {
  auto mesh = meshes_->Create({{"data", 2}, {"model", 4}});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto partial = Partial(*tensors_, *mesh, {8, 2}, {"model"},
                         [](int p, int64_t i) { return static_cast<float>((p % 4) * 100 + i); });
  ASSERT_TRUE(partial.ok()) << partial.status();
  auto scattered = collectives_->ReduceScatter(partial->id, ReduceOp::kSum, 0);
  ASSERT_TRUE(scattered.ok()) << scattered.status();
  EXPECT_EQ(scattered->sharding.partial_axes.size(), 0u);
  EXPECT_EQ(scattered->sharding.spec[0][0], "model");
  std::vector<float> got = Floats(scattered->id, 16);
  for (int64_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(got[i], 600.0f + 4 * i);

  // Broadcast device 6's contribution over 'model': every data row copies
  // from its rank-2 member (positions 2 and 6 both contribute 200 + i).
  auto bcast = collectives_->Broadcast(partial->id, 6, {.axes = {"model"}});
  ASSERT_TRUE(bcast.ok()) << bcast.status();
  got = Floats(bcast->id, 16);
  for (int64_t i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(got[i], 200.0f + i);
}

TEST_F(CollectiveServiceTest, BatchAndDataParallelGradients) {
  auto mesh = DataMesh(8, "batch");
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto w = Partial(*tensors_, *mesh, {3, 2}, {"batch"}, [](int p, int64_t i) { return p * i; });
  auto b = Partial(*tensors_, *mesh, {2}, {"batch"}, [](int p, int64_t) { return p; });
  ASSERT_TRUE(w.ok() && b.ok());
  DataParallel dp(*client_);
  auto reduced = dp.all_reduce_gradients({{"w", *w}, {"b", *b}});  // mean over "batch"
  ASSERT_TRUE(reduced.ok()) << reduced.status();
  ASSERT_EQ(reduced->size(), 2u);
  std::vector<float> got = Floats(reduced->at("w").id(), 6);
  for (int64_t i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(got[i], 3.5f * i);
  got = Floats(reduced->at("b").id(), 2);
  EXPECT_FLOAT_EQ(got[0], 3.5f);

  auto summed = DataParallel::all_reduce_gradients_static(*client_, {{"b", *b}}, "sum", "batch",
                                                          SourceHandling::kDonate);
  ASSERT_TRUE(summed.ok()) << summed.status();
  EXPECT_FLOAT_EQ(Floats(summed->at("b").id(), 2)[1], 28.0f);

  auto bad_type = dp.all_reduce_gradients({{"w", *w}}, "max");
  EXPECT_EQ(bad_type.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad_type.status().message(), "Unsupported reduce_type: max. Use 'mean' or 'sum'.");

  // The seed's default axis "batch" on a mesh whose axis is "data".
  auto data_mesh = DataMesh(8);
  auto g = Partial(*tensors_, *data_mesh, {2}, {"data"}, [](int p, int64_t) { return p; });
  ASSERT_TRUE(g.ok()) << g.status();
  auto no_batch = dp.all_reduce_gradients({{"g", *g}});
  EXPECT_EQ(no_batch.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_batch.status().message()), HasSubstr("axis 'batch' is not an axis"));
  EXPECT_THAT(std::string(no_batch.status().message()), HasSubstr("('data')"));

  // Mixed meshes / dtypes name the index.
  auto mixed = collectives_->AllReduceBatch({w->id, g->id}, "sum");
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("tensor_ids[1]"));
}

TEST_F(CollectiveServiceTest, BadInputsHavePreciseCodes) {
  auto mesh = meshes_->Create({{"data", 2}, {"model", 4}});
  ASSERT_TRUE(mesh.ok());
  auto partial = Partial(*tensors_, *mesh, {8}, {"data"}, [](int p, int64_t) { return p / 4; });
  ASSERT_TRUE(partial.ok()) << partial.status();
  const std::string id = partial->id;

  EXPECT_EQ(collectives_->AllReduce("t-0000", "sum").status().code(), absl::StatusCode::kNotFound);
  auto bad_op = collectives_->AllReduce(id, "avg", {.axes = {"data"}});
  EXPECT_EQ(bad_op.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad_op.status().message()), HasSubstr("Unsupported reduce_type: avg"));
  auto unknown_axis = collectives_->AllReduce(id, "sum", {.axes = {"batch"}});
  EXPECT_EQ(unknown_axis.status().code(), absl::StatusCode::kInvalidArgument);
  auto replicated = collectives_->AllReduce(id, "sum", {.axes = {"model"}});
  EXPECT_EQ(replicated.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(replicated.status().message()), HasSubstr("replicated over 'model'"));
  EXPECT_EQ(collectives_->AllGather(id, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(collectives_->AllGather(id, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  auto indivisible = collectives_->ReduceScatter(
      Partial(*tensors_, *mesh, {6}, {"model"}, [](int, int64_t) { return 1; })->id, ReduceOp::kSum,
      0);
  EXPECT_EQ(indivisible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(indivisible.status().message()), HasSubstr("not divisible by the 4"));
  EXPECT_EQ(collectives_->Broadcast(id, 4242).status().code(), absl::StatusCode::kNotFound);
  auto small = meshes_->Create({{"data", 2}}, {.device_ids = {0, 1}});
  ASSERT_TRUE(small.ok());
  auto pair = Partial(*tensors_, *small, {2}, {"data"}, [](int p, int64_t) { return p; });
  auto outside = collectives_->Broadcast(pair->id, 5);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("not in the tensor's mesh"));
  // The daemon keeps serving, and nothing half-made was kept.
  EXPECT_TRUE(collectives_->AllReduce(id, "sum", {.axes = {"data"}}).ok());
}

// A cancelled call (at any point: queued, mid-reduction, after) leaves no
// result and no memory behind, and the daemon keeps serving.
TEST_F(CollectiveServiceTest, ClientCancelMidCollective) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  constexpr int64_t kCount = 4 << 20;  // 16 MiB per device
  auto big = Partial(*tensors_, *mesh, {kCount}, {"data"}, [](int p, int64_t) { return p; });
  ASSERT_TRUE(big.ok()) << big.status();
  const size_t tensors_before = tensors_->List()->size();
  auto stub = pb::CollectiveService::NewStub(
      grpc::CreateChannel(client_->target(), grpc::InsecureChannelCredentials()));
  int cancelled = 0;
  for (int delay_us : {0, 100, 1000, 5000, 20000}) {
    grpc::ClientContext context;
    pb::AllReduceRequest request;
    request.set_tensor_id(big->id);
    request.set_op_name("sum");
    pb::CollectiveResponse response;
    absl::Notification done;
    grpc::Status status;
    stub->async()->AllReduce(&context, &request, &response, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    absl::SleepFor(absl::Microseconds(delay_us));  // jitter where the cancel lands
    context.TryCancel();
    done.WaitForNotification();
    if (status.error_code() == grpc::StatusCode::CANCELLED) {
      ++cancelled;
    } else {
      ASSERT_TRUE(status.ok()) << status.error_message();
      ASSERT_TRUE(tensors_->Delete({response.tensor().id()}).ok());
    }
  }
  EXPECT_GT(cancelled, 0);
  // The daemon finishes or abandons each cancelled call; none keeps a result.
  absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (tensors_->List()->size() != tensors_before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(tensors_->List()->size(), tensors_before);
  EXPECT_TRUE(collectives_->AllReduce(big->id, "mean").ok());
}

// A result ready less than kDeliveryMargin (20 ms) before the caller's
// deadline might reach the caller after it (who would then see
// DEADLINE_EXCEEDED while the daemon kept the result): the daemon keeps
// nothing and answers DEADLINE_EXCEEDED. With 15 ms in all, every answer is
// DEADLINE_EXCEEDED -- the daemon's, or gRPC's on a machine too slow to
// answer in time -- and no result stays.
TEST_F(CollectiveServiceTest, AResultReadyWithinTheDeliveryMarginIsNotKept) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto grads = Partial(*tensors_, *mesh, {16}, {"data"}, [](int p, int64_t) { return p; });
  ASSERT_TRUE(grads.ok()) << grads.status();
  const size_t tensors_before = tensors_->List()->size();
  auto stub = pb::CollectiveService::NewStub(
      grpc::CreateChannel(client_->target(), grpc::InsecureChannelCredentials()));
  auto all_reduce = [&](absl::Duration timeout, pb::CollectiveResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    pb::AllReduceRequest request;
    request.set_tensor_id(grads->id);
    request.set_op_name("sum");
    return stub->AllReduce(&context, request, response);
  };
  int by_the_daemon = 0;
  for (int i = 0; i < 20; ++i) {
    pb::CollectiveResponse response;
    const grpc::Status status = all_reduce(absl::Milliseconds(15), &response);
    ASSERT_EQ(status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED)
        << "call " << i << ": " << status.error_message();
    if (absl::StrContains(status.error_message(), "nothing was kept")) ++by_the_daemon;
  }
  GTEST_LOG_(INFO) << by_the_daemon << " of 20 answered by the daemon's margin";
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (tensors_->List()->size() != tensors_before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(tensors_->List()->size(), tensors_before);
  // With time to spare the result is kept.
  pb::CollectiveResponse response;
  const grpc::Status status = all_reduce(absl::Seconds(30), &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(tensors_->List()->size(), tensors_before + 1);
  EXPECT_TRUE(tensors_->Delete({response.tensor().id()}).ok());
}

TEST_F(CollectiveServiceTest, InputDeletedWhileCollectiveRuns) {
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok());
  auto big = Partial(*tensors_, *mesh, {2 << 20}, {"data"}, [](int p, int64_t) { return p; });
  ASSERT_TRUE(big.ok()) << big.status();
  auto stub = pb::CollectiveService::NewStub(
      grpc::CreateChannel(client_->target(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  pb::AllReduceRequest request;
  request.set_tensor_id(big->id);
  request.set_op_name("sum");
  pb::CollectiveResponse response;
  absl::Notification done;
  grpc::Status status;
  stub->async()->AllReduce(&context, &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  ASSERT_TRUE(tensors_->Delete({big->id}).ok());
  done.WaitForNotification();
  // Either the collective held the input first (and completes from it) or
  // the delete won (NOT_FOUND); never a crash or a leak.
  if (status.ok()) {
    std::vector<float> all(2 << 20);
    ASSERT_TRUE(tensors_->Download(response.tensor().id(), AsWritableBytes(all)).ok());
    EXPECT_EQ(all[0], 28.0f);
  } else {
    EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND) << status.error_message();
  }
  EXPECT_EQ(tensors_->Describe(big->id).status().code(), absl::StatusCode::kNotFound);
}

// Eight clients, each with its own mesh, reduce and gather at the same time.
TEST_F(CollectiveServiceTest, EightConcurrentClientsOnDifferentMeshes) {
  constexpr int kClients = 8;
  std::atomic<int> failures{0};
  std::vector<std::string> errors(kClients);
  std::vector<std::thread> threads;
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      auto fail = [&](const std::string& what) {
        errors[c] = what;
        failures.fetch_add(1);
      };
      auto client = daemon_->Connect();
      if (!client.ok()) return fail(client.status().ToString());
      TensorClient tensors(**client);
      MeshClient meshes(**client);
      CollectiveClient collectives(**client);
      // Meshes over different device orders and shapes.
      std::vector<int64_t> devices = {0, 1, 2, 3, 4, 5, 6, 7};
      std::rotate(devices.begin(), devices.begin() + c, devices.end());
      auto mesh = c % 2 == 0 ? meshes.Create({{"data", 8}}, {.device_ids = devices})
                             : meshes.Create({{"data", 2}, {"model", 4}}, {.device_ids = devices});
      if (!mesh.ok()) return fail(mesh.status().ToString());
      // Contributions depend only on the 'data' coordinate (replicas along
      // 'model' agree, as a valid partial tensor's do).
      const int n = static_cast<int>(mesh->axes[0].size);
      const int stride = static_cast<int>(mesh->device_ids.size()) / n;
      for (int round = 0; round < 5; ++round) {
        auto partial = Partial(tensors, *mesh, {4096}, {"data"}, [&](int p, int64_t i) {
          return static_cast<float>(p / stride + c + round + i % 3);
        });
        if (!partial.ok()) return fail(partial.status().ToString());
        auto mean = collectives.AllReduce(partial->id, "mean", {.axes = {"data"}});
        if (!mean.ok()) return fail(mean.status().ToString());
        std::vector<float> got(4096);
        if (!tensors.Download(mean->id, AsWritableBytes(got)).ok()) return fail("download");
        for (int64_t i = 0; i < 4096; ++i) {
          const float want = (n - 1) / 2.0f + c + round + i % 3;
          if (std::abs(got[i] - want) > 1e-4) return fail("wrong value at " + std::to_string(i));
        }
        if (!tensors.Delete({partial->id, mean->id}).ok()) return fail("delete");
      }
      if (!meshes.Delete(mesh->id, TensorsOnMesh::kDelete).ok()) return fail("delete mesh");
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << ::testing::PrintToString(errors);
}

}  // namespace
}  // namespace placement::client
