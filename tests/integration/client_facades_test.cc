// The seed-named facades (DevicePlacement's placement calls, DataParallel)
// against a real placementd with 8 CPU virtual devices: the behaviours in
// docs/seeds.md end to end, for trees of daemon tensors and of host
// arrays, with device memory back to its baseline after every test.
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class ClientFacadesTest : public ClientDaemonTest {
 protected:
  void SetUp() override {
    ClientDaemonTest::SetUp();
    auto placement = DevicePlacement::Create(*client_);
    ASSERT_TRUE(placement.ok()) << placement.status();
    placement_ = std::make_unique<DevicePlacement>(*std::move(placement));
  }

  // Device ids holding shards of `info`, in shard order.
  static std::vector<int64_t> Devices(const TensorInfo& info) {
    std::vector<int64_t> ids;
    for (const auto& s : info.shards) ids.push_back(s.device_id);
    return ids;
  }
  // Per shard, the [begin, end) of dimension `dim`.
  static std::vector<std::pair<int64_t, int64_t>> Ranges(const TensorInfo& info, int dim) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& s : info.shards) out.emplace_back(s.ranges[dim].begin, s.ranges[dim].end);
    return out;
  }
  static bool FullyReplicated(const TensorInfo& info) {
    for (const auto& s : info.shards) {
      for (int d = 0; d < info.shape.size(); ++d) {
        if (s.ranges[d].begin != 0 || s.ranges[d].end != info.shape[d]) return false;
      }
    }
    return true;
  }

  std::unique_ptr<DevicePlacement> placement_;
};

TEST_F(ClientFacadesTest, PlaceOnDeviceDefaultsToTheDefaultDevice) {
  std::vector<float> x(32 * 4, 1.5f);
  std::vector<int32_t> y(32, 7);
  HostTree batch = {{"x", HostArray::Of(x, {32, 4})}, {"y", HostArray::Of(y, {32})}};
  auto placed = placement_->place_on_device(batch);
  ASSERT_TRUE(placed.ok()) << placed.status();
  ASSERT_EQ(placed->size(), 2u);
  EXPECT_THAT(Devices(placed->at("x").info()), ElementsAre(placement_->default_device()));
  auto moved = placement_->place_on_device(*placed, 6, SourceHandling::kDonate);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_THAT(Devices(moved->at("y").info()), ElementsAre(6));
  EXPECT_EQ(tensors_->Describe(placed->at("y").id()).status().code(), absl::StatusCode::kNotFound);
  auto back = tensors_->DownloadBytes(moved->at("x").id());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(std::memcmp(back->bytes.data(), x.data(), x.size() * 4), 0);
  EXPECT_EQ(placement_->place_on_device(*moved, 99).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientFacadesTest, DistributeBatchDropsSpecEntriesBeyondRank) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  auto mesh = manager->create_data_parallel_mesh();
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  // The seed's example: P("data", None) over {"images": (8,28,28,3), "labels": (8,)}.
  std::vector<float> images(8 * 28 * 28 * 3);
  std::vector<float> labels(8);
  HostTree batch = {{"images", HostArray::Of(images, {8, 28, 28, 3})},
                    {"labels", HostArray::Of(labels, {8})}};
  auto distributed = placement_->distribute_batch(batch, Placement::Sharded(*mesh, {{"data"}, {}}));
  ASSERT_TRUE(distributed.ok()) << distributed.status();
  const TensorInfo& l = distributed->at("labels").info();
  ASSERT_EQ(l.shards.size(), 8u);
  EXPECT_EQ(l.shards[3].ranges[0].begin, 3);
  EXPECT_EQ(distributed->at("images").info().shards[7].ranges[0].begin, 7);
  // The same on daemon tensors.
  auto again = placement_->distribute_batch(*distributed, Placement::Replicated(*mesh));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(FullyReplicated(again->at("images").info()));
}

TEST_F(ClientFacadesTest, ReplicateAcrossDevicesAllOrASubset) {
  std::vector<float> w(6, 2.0f);
  std::vector<float> scalar = {3.0f};
  HostTree weights = {{"w", HostArray::Of(w, {2, 3})}, {"s", HostArray::Of(scalar, {})}};
  auto all = placement_->replicate_across_devices(weights);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_THAT(Devices(all->at("w").info()), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  EXPECT_TRUE(FullyReplicated(all->at("w").info()));
  EXPECT_EQ(all->at("s").info().shards.size(), 8u);  // scalars too

  auto subset = placement_->replicate_across_devices(*all, std::vector<int64_t>{2, 5});
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_THAT(Devices(subset->at("w").info()), ElementsAre(2, 5));
  EXPECT_THAT(Devices(subset->at("s").info()), ElementsAre(2, 5));
  auto bytes = tensors_->DownloadBytes(subset->at("w").id(), DownloadSelection::Device(5));
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  EXPECT_EQ(std::memcmp(bytes->bytes.data(), w.data(), 24), 0);
  EXPECT_EQ(placement_->replicate_across_devices(*all, std::vector<int64_t>{2, 42}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientFacadesTest, ShardBatchDimEdgeCases) {
  auto mesh = DataMesh(4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> matrix(8 * 4), vector(8), scalar(1), cols(2 * 8);
  HostTree data = {{"matrix", HostArray::Of(matrix, {8, 4})},
                   {"vector", HostArray::Of(vector, {8})},
                   {"scalar", HostArray::Of(scalar, {})}};
  auto sharded = placement_->shard_batch_dim(data, *mesh);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_THAT(Ranges(sharded->at("matrix").info(), 0),
              ElementsAre(std::make_pair(0, 2), std::make_pair(2, 4), std::make_pair(4, 6),
                          std::make_pair(6, 8)));
  EXPECT_THAT(Ranges(sharded->at("vector").info(), 0),
              ElementsAre(std::make_pair(0, 2), std::make_pair(2, 4), std::make_pair(4, 6),
                          std::make_pair(6, 8)));
  EXPECT_EQ(sharded->at("scalar").info().shards.size(), 4u);  // rank 0: replicated

  // batch_axis >= rank: replicated, no error (the vector has rank 1).
  auto beyond = placement_->shard_batch_dim(TensorTree{{"v", sharded->at("vector")}}, *mesh, 1);
  ASSERT_TRUE(beyond.ok()) << beyond.status();
  EXPECT_TRUE(FullyReplicated(beyond->at("v").info()));

  // Negative batch_axis counts from the end: -1 on [2, 8] shards dimension 1.
  auto last = placement_->shard_batch_dim(HostTree{{"c", HostArray::Of(cols, {2, 8})}}, *mesh, -1);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_THAT(Ranges(last->at("c").info(), 1),
              ElementsAre(std::make_pair(0, 2), std::make_pair(2, 4), std::make_pair(4, 6),
                          std::make_pair(6, 8)));
  EXPECT_THAT(Ranges(last->at("c").info(), 0),
              ElementsAre(std::make_pair(0, 2), std::make_pair(0, 2), std::make_pair(0, 2),
                          std::make_pair(0, 2)));

  // Indivisible: the message names the numbers.
  std::vector<float> six(6);
  auto odd = placement_->shard_batch_dim(HostTree{{"odd", HostArray::Of(six, {6})}}, *mesh);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(odd.status().message(), HasSubstr("6"));
  EXPECT_THAT(odd.status().message(), HasSubstr("4"));

  // An axis the mesh lacks: rejected here when the mesh's axes are known,
  // by the daemon when only the id is.
  auto local = placement_->shard_batch_dim(data, *mesh, 0, "model");
  EXPECT_EQ(local.status().code(), absl::StatusCode::kInvalidArgument);
  auto remote = placement_->shard_batch_dim(data, mesh->id, 0, "model");
  EXPECT_EQ(remote.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(placement_->shard_batch_dim(data, "no-such-mesh").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ClientFacadesTest, DataParallelShardingStateAndParams) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  auto mesh = manager->create_hybrid_mesh(4, 2);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  DataParallel dp(*client_);
  auto sharding = dp.create_data_parallel_sharding(*mesh);
  ASSERT_TRUE(sharding.ok()) << sharding.status();

  std::vector<float> inputs(32 * 784), targets(32);
  HostTree batch = {{"inputs", HostArray::Of(inputs, {32, 784})},
                    {"targets", HostArray::Of(targets, {32})}};
  auto sharded = dp.shard_batch(batch, *sharding);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  // P('data') on a (data=4, model=2) mesh: 8 rows per data index, model replicates.
  EXPECT_THAT(Ranges(sharded->at("targets").info(), 0),
              ElementsAre(std::make_pair(0, 8), std::make_pair(0, 8), std::make_pair(8, 16),
                          std::make_pair(8, 16), std::make_pair(16, 24), std::make_pair(16, 24),
                          std::make_pair(24, 32), std::make_pair(24, 32)));
  auto static_sharded = DataParallel::shard_batch_static(*client_, *sharded, *sharding);
  ASSERT_TRUE(static_sharded.ok()) << static_sharded.status();

  std::vector<float> kernel(8 * 16), bias(16), step(1);
  HostTree state = {{"kernel", HostArray::Of(kernel, {8, 16})},
                    {"bias", HostArray::Of(bias, {16})},
                    {"step", HostArray::Of(step, {})}};
  auto replicated = dp.shard_model_state(state, *mesh);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_TRUE(FullyReplicated(replicated->at("kernel").info()));
  EXPECT_EQ(replicated->at("kernel").info().device_bytes, 8 * 8 * 16 * 4);

  // "shard": dimension 0 over the mesh's first axis ("data", 4 ways); a
  // scalar cannot be split (JAX rejects P('data') on rank 0 too), and then
  // nothing of the group is placed.
  auto list_before = tensors_->List();
  ASSERT_TRUE(list_before.ok());
  auto with_scalar = dp.shard_model_state(*replicated, *mesh, "shard");
  EXPECT_EQ(with_scalar.status().code(), absl::StatusCode::kInvalidArgument);
  auto list_after = tensors_->List();
  ASSERT_TRUE(list_after.ok());
  EXPECT_EQ(list_after->size(), list_before->size());
  TensorTree arrays = *replicated;
  arrays.erase("step");
  auto split = dp.shard_model_state(arrays, *mesh, "shard");
  ASSERT_TRUE(split.ok()) << split.status();
  // Device k sits at (k / 2, k % 2): rows [2 * (k / 2), ...) of the kernel.
  EXPECT_EQ(split->at("kernel").info().shards[2].ranges[0].begin, 2);
  EXPECT_EQ(split->at("bias").info().shards[7].ranges[0].begin, 12);

  auto typo = dp.shard_model_state(*replicated, *mesh, "sharded");
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(typo.status().message(), HasSubstr("'sharded'"));

  auto params = dp.replicate_params(*split, *mesh);
  ASSERT_TRUE(params.ok()) << params.status();
  EXPECT_TRUE(FullyReplicated(params->at("bias").info()));
  auto bytes = tensors_->DownloadBytes(params->at("kernel").id());
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(std::memcmp(bytes->bytes.data(), kernel.data(), kernel.size() * 4), 0);

  EXPECT_EQ(dp.create_data_parallel_sharding(*mesh, "batch").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientFacadesTest, SeedConvenienceFunctions) {
  std::vector<float> images(8 * 4, 0.5f);
  std::vector<int32_t> labels(8, 3);
  HostTree batch = {{"images", HostArray::Of(images, {8, 4})},
                    {"labels", HostArray::Of(labels, {8})}};
  // place_on_device(data): the daemon's first device when none is given.
  auto placed = place_on_device(*client_, batch);
  ASSERT_TRUE(placed.ok()) << placed.status();
  EXPECT_THAT(Devices(placed->at("images").info()), ElementsAre(0));
  auto on_five = place_on_device(*client_, *placed, 5);
  ASSERT_TRUE(on_five.ok()) << on_five.status();
  EXPECT_THAT(Devices(on_five->at("labels").info()), ElementsAre(5));
  EXPECT_TRUE(tensors_->Describe(placed->at("labels").id()).ok());  // kept, like device_put
  EXPECT_EQ(place_on_device(*client_, batch, 99).status().code(), absl::StatusCode::kNotFound);

  // distribute_batch(data, sharding), host and daemon trees alike.
  auto mesh = DataMesh(8);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  auto spread = distribute_batch(*client_, batch, Placement::Sharded(*mesh, {{"data"}, {}}));
  ASSERT_TRUE(spread.ok()) << spread.status();
  EXPECT_THAT(Devices(spread->at("labels").info()), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  auto replicated = distribute_batch(*client_, *spread, Placement::Replicated(*mesh));
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_TRUE(FullyReplicated(replicated->at("images").info()));

  // get_batch_size_recommendation: the library's table equals the daemon's.
  for (HardwareType type :
       {HardwareType::kTpuV5e, HardwareType::kTpuV5p, HardwareType::kTpuV4, HardwareType::kH100,
        HardwareType::kA100, HardwareType::kV100, HardwareType::kCpu, HardwareType::kUnknown,
        HardwareType::kH200, HardwareType::kB200}) {
    auto remote = get_batch_size_recommendation(*client_, type);
    ASSERT_TRUE(remote.ok()) << HardwareTypeName(type) << ": " << remote.status();
    EXPECT_EQ(get_batch_size_recommendation(type), *remote) << HardwareTypeName(type);
  }
  EXPECT_EQ(get_batch_size_recommendation(HardwareType::kH100).critical_batch_size, 298);
  auto detected = get_batch_size_recommendation(*client_);
  ASSERT_TRUE(detected.ok()) << detected.status();
  EXPECT_EQ(detected->hardware_type, HardwareType::kCpu);
}

TEST_F(ClientFacadesTest, DevicePlacementHardwareCallsUseSeedNames) {
  EXPECT_EQ(placement_->hardware_type(), HardwareType::kCpu);
  EXPECT_EQ(HardwareTypeName(placement_->hardware_type()), "cpu");
  EXPECT_EQ(placement_->num_devices(), 8);
  EXPECT_EQ(&placement_->client(), client_.get());
  auto rec = placement_->get_batch_size_recommendation();
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->optimal_batch_size, 32);
  auto h100 = placement_->get_batch_size_recommendation(HardwareType::kH100);
  ASSERT_TRUE(h100.ok()) << h100.status();
  EXPECT_EQ(h100->critical_batch_size, 298);
  ASSERT_TRUE(h100->roofline.has_value());
  auto validated = placement_->validate_batch_size(8);
  ASSERT_TRUE(validated.ok()) << validated.status();
  EXPECT_TRUE(validated->first);
  EXPECT_EQ(validated->second,
            "Batch size 8 is below critical size 16 for cpu. Consider increasing for optimal "
            "throughput.");
  auto info = placement_->get_device_info();
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->num_devices, 8);
  EXPECT_EQ(info->hardware_type, HardwareType::kCpu);
  ASSERT_EQ(info->devices.size(), 8u);
  EXPECT_EQ(info->devices[7].id, 7);
}

TEST_F(ClientFacadesTest, JsonTextUsesTheWireFieldNames) {
  auto mesh = DataMesh(4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x(8, 1.0f);
  auto t = tensors_->Upload(HostArray::Of(x, {8}), Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  std::string json = ToJson(*t);
  EXPECT_THAT(json, HasSubstr("\"id\":\"" + t->id + "\""));
  EXPECT_THAT(json, HasSubstr("\"dtype\":\"DTYPE_F32\""));
  EXPECT_THAT(json, HasSubstr("\"size_bytes\":\"32\""));
  EXPECT_THAT(json, HasSubstr("\"replica_id\":\"0\""));
  auto info = meshes_->Get(mesh->id);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_THAT(ToJson(*info), HasSubstr("\"total_devices\":\"4\""));
  auto rec = client_->GetBatchSizeRecommendation();
  ASSERT_TRUE(rec.ok());
  EXPECT_THAT(ToJson(*rec), HasSubstr("\"hardware_type_name\":\"cpu\""));
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok());
  EXPECT_THAT(ToJson(*devices), HasSubstr("\"devices\":[{\"id\":\"0\""));
}

}  // namespace
}  // namespace placement::client
