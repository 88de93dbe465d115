#include "server/collective/collective_service_core.h"

#include <functional>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/collective/local/local_engine.h"
#include "server/platform/cpu/cpu_backend.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server {
namespace {

using testing::Decode;
using testing::EncodeOne;
using ::testing::HasSubstr;

// value(mesh position, global row-major index) of every shard element.
using ValueFn = std::function<double(int64_t, int64_t)>;

// Calls fn(global flat index, local element offset) over `box` row-major.
void ForEachElement(const Shape& shape, const Box& box,
                    const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t n = BoxNumElements(box);
  std::vector<int64_t> index(box.size());
  for (size_t d = 0; d < box.size(); ++d) index[d] = box[d].begin;
  for (int64_t local = 0; local < n; ++local) {
    int64_t global = 0;
    for (size_t d = 0; d < shape.size(); ++d) global = global * shape[d] + index[d];
    fn(global, local);
    for (int d = static_cast<int>(box.size()) - 1; d >= 0; --d) {
      if (++index[d] < box[d].end) break;
      index[d] = box[d].begin;
    }
  }
}

class CollectiveCoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.num_devices = 8;
    options.device_memory_bytes = 16 << 20;
    backend_ = *CpuBackend::Create(options);
    store_ = std::make_unique<TensorStore>(backend_.get(), TensorStoreOptions{});
    LocalEngineOptions engine_options;
    engine_options.chunk_bytes = 1024;
    engine_ = std::make_unique<LocalEngine>(engine_options);
    core_ = std::make_unique<CollectiveServiceCore>(store_.get(), engine_.get());
    baseline_ = InUse();
  }
  void TearDown() override {
    std::vector<std::string> ids;
    for (const auto& t : store_->List()) ids.push_back(t->id);
    if (!ids.empty()) ASSERT_TRUE(store_->Delete(ids).ok());
    EXPECT_EQ(InUse(), baseline_);
  }

  int64_t InUse() const {
    int64_t total = 0;
    for (const auto& d : backend_->Devices()) total += backend_->MemoryInUse(d.id);
    return total;
  }

  std::shared_ptr<const Tensor> Make(DType dtype, Shape shape, const Mesh& mesh, PartitionSpec spec,
                                     std::vector<std::string> partial, const ValueFn& value,
                                     std::optional<ReduceOp> partial_op = std::nullopt) {
    NamedSharding sharding = *NamedSharding::Create(mesh, std::move(spec), std::move(partial));
    auto tensor = *store_->Allocate(dtype, shape, sharding, "mesh", "t", "tests");
    tensor->partial_op = partial_op;
    const int64_t elem = DTypeSize(dtype);
    for (Shard& shard : tensor->shards) {
      std::vector<std::byte> bytes(shard.buffer->size());
      ForEachElement(shape, shard.domain.box, [&](int64_t global, int64_t local) {
        EncodeOne(dtype, value(shard.domain.mesh_position, global), bytes.data() + local * elem);
      });
      EXPECT_TRUE(backend_->WriteBytes(bytes.data(), *shard.buffer, 0, bytes.size()).ok());
    }
    return store_->Commit(std::move(tensor));
  }

  // Every element of every shard equals want(mesh position, global index).
  void ExpectValues(const Tensor& t, const ValueFn& want) {
    for (const Shard& shard : t.shards) {
      std::vector<double> got =
          Decode(t.dtype, shard.buffer->data(), BoxNumElements(shard.domain.box));
      ForEachElement(t.shape, shard.domain.box, [&](int64_t global, int64_t local) {
        const double w = want(shard.domain.mesh_position, global);
        EXPECT_TRUE(testing::Near(t.dtype, got[local], w))
            << "device " << shard.domain.device_id << " index " << global << ": got " << got[local]
            << ", want " << w;
      });
    }
  }

  const Mesh mesh24_ = *Mesh::Create({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7});
  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<TensorStore> store_;
  std::unique_ptr<LocalEngine> engine_;
  std::unique_ptr<CollectiveServiceCore> core_;
  int64_t baseline_ = 0;
};

int64_t DataIndex(int64_t position) { return position / 4; }

// Partial over 'data': device (d, m) holds contribution g + 100 d.
TEST_F(CollectiveCoreTest, AllReducePartialKeepAndDonate) {
  auto input = Make(DType::kF32, {8, 3}, mesh24_, {{{"model"}}}, {"data"},
                    [](int64_t p, int64_t g) { return g + 100.0 * DataIndex(p); });
  auto result = core_->AllReduce({input->id, {"data"}}, ReduceOp::kSum, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE((*result)->sharding.partial_axes().empty());
  EXPECT_EQ((*result)->sharding.spec(), (PartitionSpec{{{"model"}}}));
  ExpectValues(**result, [](int64_t, int64_t g) { return 2.0 * g + 100.0; });
  ASSERT_TRUE(store_->Get(input->id).ok());  // kept

  // Donation: in place, no new memory, the input's id is gone.
  const std::string id = input->id;
  input.reset();
  const int64_t before = InUse();
  auto donated =
      core_->AllReduce({id, {"data"}, SourceHandling::kDonate, "avg"}, ReduceOp::kMean, {});
  ASSERT_TRUE(donated.ok()) << donated.status();
  EXPECT_EQ(InUse(), before);
  EXPECT_EQ(store_->Get(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ((*donated)->name, "avg");
  ExpectValues(**donated, [](int64_t, int64_t g) { return g + 50.0; });
}

TEST_F(CollectiveCoreTest, AllReduceDim0BlocksAndDefaultOp) {
  // f32[16, 5] with dimension 0 over (data, model): block k on position k.
  auto input = Make(DType::kI32, {16, 5}, mesh24_, {{{"data", "model"}}}, {},
                    [](int64_t, int64_t g) { return static_cast<double>(g % 7); });
  auto result = core_->AllReduce({input->id}, std::nullopt, {});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ((*result)->shape, (Shape{2, 5}));
  ExpectValues(**result, [](int64_t, int64_t g) {
    double sum = 0;
    for (int k = 0; k < 8; ++k) sum += (k * 10 + g) % 7;
    return sum;
  });

  // op unset on a partial tensor: its partial_op (MEAN) applies.
  auto partial = Make(
      DType::kF64, {4}, mesh24_, {}, {"model"},
      [](int64_t p, int64_t) { return static_cast<double>(p % 4); },
      /*partial_op=*/ReduceOp::kMean);
  auto mean = core_->AllReduce({partial->id, {"model"}}, std::nullopt, {});
  ASSERT_TRUE(mean.ok()) << mean.status();
  ExpectValues(**mean, [](int64_t, int64_t) { return 1.5; });
}

TEST_F(CollectiveCoreTest, AllReduceErrors) {
  auto input = Make(DType::kF32, {4}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1.0; });
  auto unknown = core_->AllReduce({input->id, {"batch"}}, ReduceOp::kMean, {});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()), HasSubstr("('data', 'model')"));
  EXPECT_EQ(core_->AllReduce({input->id}, ReduceOp::kSum, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);  // 'model' is replicated
  EXPECT_EQ(core_->AllReduce({"t-nope"}, ReduceOp::kSum, {}).status().code(),
            absl::StatusCode::kNotFound);
  auto flags = Make(DType::kBool, {4}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1.0; });
  EXPECT_EQ(core_->AllReduce({flags->id, {"data"}}, ReduceOp::kMax, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(CollectiveCoreTest, AllReduceBatchFusesAndValidates) {
  auto a = Make(DType::kF32, {4, 2}, mesh24_, {}, {"data"},
                [](int64_t p, int64_t g) { return g + DataIndex(p); });
  auto b = Make(DType::kF32, {3}, mesh24_, {}, {"data"},
                [](int64_t p, int64_t g) { return 10.0 * g * (1 + DataIndex(p)); });
  auto results =
      core_->AllReduceBatch({a->id, b->id}, {"data"}, ReduceOp::kSum, SourceHandling::kKeep, {});
  ASSERT_TRUE(results.ok()) << results.status();
  ASSERT_EQ(results->size(), 2u);
  ExpectValues(*(*results)[0], [](int64_t, int64_t g) { return 2.0 * g + 1; });
  ExpectValues(*(*results)[1], [](int64_t, int64_t g) { return 30.0 * g; });

  auto other_dtype =
      Make(DType::kF64, {3}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1; });
  auto bad = core_->AllReduceBatch({a->id, other_dtype->id}, {"data"}, ReduceOp::kSum,
                                   SourceHandling::kKeep, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("tensor_ids[1]"));

  const Mesh mesh4 = *Mesh::Create({{"data", 4}}, {0, 1, 2, 3});
  auto other_mesh = Make(DType::kF32, {3}, mesh4, {}, {"data"}, [](int64_t, int64_t) { return 1; });
  bad = core_->AllReduceBatch({a->id, other_mesh->id}, {"data"}, ReduceOp::kSum,
                              SourceHandling::kKeep, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("a batch reduces tensors of one mesh"));

  auto not_partial = Make(DType::kF32, {3}, mesh24_, {}, {}, [](int64_t, int64_t) { return 1; });
  bad = core_->AllReduceBatch({a->id, b->id, not_partial->id}, {"data"}, ReduceOp::kSum,
                              SourceHandling::kKeep, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("tensor_ids[2]"));

  EXPECT_EQ(
      core_->AllReduceBatch({a->id, a->id}, {"data"}, ReduceOp::kSum, SourceHandling::kDonate, {})
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  const int64_t count = store_->size();
  const std::vector<std::string> ids = {a->id, b->id};
  a.reset();
  b.reset();
  auto donated = core_->AllReduceBatch(ids, {"data"}, ReduceOp::kSum, SourceHandling::kDonate, {});
  ASSERT_TRUE(donated.ok()) << donated.status();
  EXPECT_EQ(store_->size(), count);
  ExpectValues(*(*donated)[0], [](int64_t, int64_t g) { return 2.0 * g + 1; });
}

TEST_F(CollectiveCoreTest, AllGatherContiguousAndStaged) {
  // Dimension 0 over 'model': direct. Dimension 1 over 'model': staged.
  for (int dim : {0, 1}) {
    PartitionSpec spec;
    spec.dims.resize(dim + 1);
    spec.dims[dim] = {"model"};
    auto input = Make(DType::kBF16, {8, 12}, mesh24_, spec, {},
                      [](int64_t, int64_t g) { return static_cast<double>(g % 50); });
    auto result = core_->AllGather({input->id, {}, SourceHandling::kDonate}, dim, {});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE((*result)->sharding.IsFullyReplicated());
    ExpectValues(**result, [](int64_t, int64_t g) { return static_cast<double>(g % 50); });
    EXPECT_EQ(store_->Get(input->id).status().code(), absl::StatusCode::kNotFound);
  }
}

TEST_F(CollectiveCoreTest, ReduceScatterContiguousAndStaged) {
  for (int dim : {0, 1}) {
    auto input = Make(DType::kF32, {8, 8}, mesh24_, {{{"data"}}}, {"model"},
                      [](int64_t p, int64_t g) { return g + (p % 4); });
    auto result = core_->ReduceScatter({input->id}, ReduceOp::kSum, dim, {});
    ASSERT_TRUE(result.ok()) << result.status();
    PartitionSpec want_spec{{{"data"}}};
    if (dim == 0) want_spec.dims[0].push_back("model");
    if (dim == 1) want_spec.dims.push_back({"model"});
    EXPECT_EQ((*result)->sharding.spec(), want_spec);
    ExpectValues(**result, [](int64_t, int64_t g) { return 4.0 * g + 6; });
  }
}

TEST_F(CollectiveCoreTest, BroadcastFromRoot) {
  auto input = Make(DType::kI64, {5}, mesh24_, {}, {"model"},
                    [](int64_t p, int64_t g) { return 1000.0 * p + g; });
  auto result = core_->Broadcast({input->id, {"model"}}, /*root_device_id=*/6, {});
  ASSERT_TRUE(result.ok()) << result.status();
  // Each data row copies from its rank-2 member: positions 2 and 6.
  ExpectValues(**result, [](int64_t p, int64_t g) { return 1000.0 * (DataIndex(p) * 4 + 2) + g; });
  EXPECT_EQ(core_->Broadcast({input->id}, 99, {}).status().code(), absl::StatusCode::kNotFound);
  const Mesh mesh4 = *Mesh::Create({{"data", 4}}, {0, 1, 2, 3});
  auto small = Make(DType::kF32, {4}, mesh4, {}, {}, [](int64_t, int64_t) { return 1; });
  auto outside = core_->Broadcast({small->id}, 5, {});
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("not in the tensor's mesh"));
}

// The groups a request runs over, as global device ids in rank order (what
// a cluster compares with a call's participants), with Run's planning
// errors; nothing is allocated.
TEST_F(CollectiveCoreTest, DeviceGroupsNameEveryGroupsDevicesInRankOrder) {
  const Mesh reversed = *Mesh::Create({{"data", 2}, {"model", 4}}, {7, 6, 5, 4, 3, 2, 1, 0});
  auto partial =
      Make(DType::kF32, {4}, reversed, {}, {"data", "model"}, [](int64_t, int64_t) { return 1.0; });
  CollectiveRequest request;
  request.tensor_ids = {partial->id};
  request.axes = {"data"};
  const int64_t before = InUse();
  auto over_data = core_->DeviceGroups(request);
  ASSERT_TRUE(over_data.ok()) << over_data.status();
  EXPECT_EQ(*over_data, (std::vector<std::vector<int64_t>>{{7, 3}, {6, 2}, {5, 1}, {4, 0}}));
  request.kind = CollectiveRequestKind::kBroadcast;
  request.axes = {"model"};
  request.root_device_id = 1;
  auto over_model = core_->DeviceGroups(request);
  ASSERT_TRUE(over_model.ok()) << over_model.status();
  EXPECT_EQ(*over_model, (std::vector<std::vector<int64_t>>{{7, 6, 5, 4}, {3, 2, 1, 0}}));
  // A batch: every input's groups, in request order.
  request.kind = CollectiveRequestKind::kAllReduceBatch;
  request.tensor_ids = {partial->id, partial->id};
  request.axes = {"data", "model"};
  auto batch = core_->DeviceGroups(request);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(*batch, (std::vector<std::vector<int64_t>>{{7, 6, 5, 4, 3, 2, 1, 0},
                                                       {7, 6, 5, 4, 3, 2, 1, 0}}));
  EXPECT_EQ(InUse(), before);

  request.kind = CollectiveRequestKind::kReduceScatter;
  request.tensor_ids = {"t-nope"};
  EXPECT_EQ(core_->DeviceGroups(request).status().code(), absl::StatusCode::kNotFound);
  request.kind = CollectiveRequestKind::kAllGather;
  request.tensor_ids = {partial->id};
  EXPECT_EQ(core_->DeviceGroups(request).status().code(),
            absl::StatusCode::kFailedPrecondition);  // nothing sharded to gather
  request.kind = CollectiveRequestKind::kBroadcast;
  request.root_device_id = 9;
  auto outside = core_->DeviceGroups(request);
  EXPECT_EQ(outside.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(outside.status().message()), HasSubstr("not in the tensor's mesh"));
}

// Deleting the input while the collective runs: the id goes at once, the
// collective completes from the buffers it holds, memory is freed after.
TEST_F(CollectiveCoreTest, InputDeletedMidCollectiveCompletes) {
  auto input = Make(DType::kF32, {64, 64}, mesh24_, {}, {"data"},
                    [](int64_t p, int64_t g) { return g + DataIndex(p); });
  const std::string id = input->id;
  input.reset();
  bool deleted = false;
  CollectiveContext context;
  context.cancelled = [&] {
    if (!deleted) deleted = store_->Delete({id}).ok();
    return false;
  };
  auto result = core_->AllReduce({id, {"data"}}, ReduceOp::kSum, context);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(deleted);
  EXPECT_EQ(store_->Get(id).status().code(), absl::StatusCode::kNotFound);
  ExpectValues(**result, [](int64_t, int64_t g) { return 2.0 * g + 1; });
}

TEST_F(CollectiveCoreTest, CancelledCollectiveKeepsNothing) {
  auto input =
      Make(DType::kF32, {64, 64}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1; });
  const int64_t tensors = store_->size();
  const int64_t in_use = InUse();
  int polls = 0;
  CollectiveContext context;
  context.cancelled = [&] { return ++polls > 3; };
  auto result = core_->AllReduce({input->id, {"data"}}, ReduceOp::kSum, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store_->size(), tensors);
  EXPECT_EQ(InUse(), in_use);
  ASSERT_TRUE(store_->Get(input->id).ok());

  // A donated input interrupted mid-way is consumed (documented).
  const std::string id = input->id;
  input.reset();
  polls = 0;
  result = core_->AllReduce({id, {"data"}, SourceHandling::kDonate}, ReduceOp::kSum, context);
  EXPECT_EQ(result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(store_->Get(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(InUse(), baseline_);
}

TEST_F(CollectiveCoreTest, CountsCompletedCollectives) {
  Metrics metrics;
  CollectiveServiceCore counted(store_.get(), engine_.get(), &metrics);
  auto input = Make(DType::kF32, {4}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1; });
  ASSERT_TRUE(counted.AllReduce({input->id, {"data"}}, ReduceOp::kSum, {}).ok());
  EXPECT_FALSE(counted.AllReduce({input->id, {"model"}}, ReduceOp::kSum, {}).ok());
  const MetricLabels labels = {{"collective", "all_reduce"}};
  EXPECT_EQ(metrics.CounterValue("placementd_collectives_total", labels), 1);
  EXPECT_EQ(metrics.CounterValue("placementd_collective_bytes_total", labels), 8 * 16);
  EXPECT_TRUE(counted.IsQuick({input->id}));
}

TEST_F(CollectiveCoreTest, DonationRefusedWhileInUse) {
  auto input = Make(DType::kF32, {4}, mesh24_, {}, {"data"}, [](int64_t, int64_t) { return 1; });
  // `input` is a second holder, like a running download.
  auto result =
      core_->AllReduce({input->id, {"data"}, SourceHandling::kDonate}, ReduceOp::kSum, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(store_->Get(input->id).ok());
}

}  // namespace
}  // namespace placement::server
