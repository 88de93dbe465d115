// Meshes through the client library against a real placementd with 8 CPU
// virtual devices: the seed's DeviceMeshManager behaviours end to end.
#include <memory>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "placement/client/placement.h"
#include "tests/integration/client_daemon_fixture.h"

namespace placement::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The shared fixture deletes every mesh (and its tensors) after each test
// and checks device memory is back to its baseline.
class ClientMeshesTest : public ClientDaemonTest {
 protected:
  static std::vector<int64_t> Ids(const Mesh& mesh) {
    return {mesh.device_ids.begin(), mesh.device_ids.end()};
  }
  static MeshAxes Axes(const Mesh& mesh) {
    MeshAxes axes;
    for (const auto& a : mesh.axes) axes.push_back(a);
    return axes;
  }
};

TEST_F(ClientMeshesTest, ManagerSeesEveryDevice) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok()) << manager.status();
  EXPECT_EQ(manager->num_devices(), 8);
  ASSERT_EQ(manager->devices().size(), 8u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(manager->devices()[i].id, i);
}

TEST_F(ClientMeshesTest, DictAndListFormsMeanTheSame) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  // {"data": 2, "model": 1} and [("data", 2), ("model", 1)] are one MeshAxes.
  auto from_dict = manager->create_device_mesh({{"data", 2}, {"model", 1}});
  auto from_list = manager->create_device_mesh(MeshAxes{{"data", 2}, {"model", 1}});
  ASSERT_TRUE(from_dict.ok()) << from_dict.status();
  ASSERT_TRUE(from_list.ok()) << from_list.status();
  EXPECT_NE(from_dict->id, from_list->id);
  for (const auto* mesh : {&*from_dict, &*from_list}) {
    EXPECT_EQ(Axes(*mesh), (MeshAxes{{"data", 2}, {"model", 1}}));
    EXPECT_THAT(Ids(*mesh), ElementsAre(0, 1));
    EXPECT_EQ(mesh->total_devices, 2);
  }
}

TEST_F(ClientMeshesTest, NotEnoughDevicesIsFailedPrecondition) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  auto mesh = manager->create_device_mesh({{"data", 4}, {"model", 4}});
  EXPECT_EQ(mesh.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(mesh.status().message(),
              HasSubstr("Not enough devices: mesh requires 16 devices but only 8 available."));
  auto preset = manager->create_data_parallel_mesh(16);
  EXPECT_EQ(preset.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(preset.status().message(), HasSubstr("16"));

  // A manager over a subset counts only its devices, as the seed's does.
  auto subset = DeviceMeshManager::Create(*client_, std::vector<int64_t>{4, 5, 6, 7});
  ASSERT_TRUE(subset.ok()) << subset.status();
  EXPECT_EQ(subset->num_devices(), 4);
  auto too_big = subset->create_device_mesh({{"data", 8}});
  EXPECT_EQ(too_big.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(too_big.status().message(),
            "Not enough devices: mesh requires 8 devices but only 4 available.");
  auto fits = subset->create_device_mesh({{"data", 2}, {"model", 2}});
  ASSERT_TRUE(fits.ok()) << fits.status();
  EXPECT_THAT(Ids(*fits), ElementsAre(4, 5, 6, 7));
  auto dp = subset->create_data_parallel_mesh();
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_THAT(Ids(*dp), ElementsAre(4, 5, 6, 7));

  EXPECT_EQ(DeviceMeshManager::Create(*client_, std::vector<int64_t>{1, 99}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(DeviceMeshManager::Create(*client_, std::vector<int64_t>{1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientMeshesTest, BadAxesAreInvalidArgument) {
  MeshClient meshes(*client_);
  for (const MeshAxes& bad : std::vector<MeshAxes>{{},
                                                   {{"data", 0}},
                                                   {{"data", -1}},
                                                   {{"data", 2}, {"data", 2}},
                                                   {{"", 2}},
                                                   {{"has space", 2}}}) {
    auto mesh = meshes.Create(bad);
    EXPECT_EQ(mesh.status().code(), absl::StatusCode::kInvalidArgument)
        << bad.size() << " " << mesh.status();
  }
  CreateMeshOptions repeated;
  repeated.device_ids = {0, 0};
  EXPECT_EQ(meshes.Create({{"data", 2}}, repeated).status().code(),
            absl::StatusCode::kInvalidArgument);
  CreateMeshOptions unknown;
  unknown.device_ids = {0, 42};
  EXPECT_EQ(meshes.Create({{"data", 2}}, unknown).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto list = meshes.List();
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

TEST_F(ClientMeshesTest, Presets) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  auto dp = manager->create_data_parallel_mesh();
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ(Axes(*dp), (MeshAxes{{"data", 8}}));
  EXPECT_THAT(Ids(*dp), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));

  auto batch = manager->create_data_parallel_mesh(4, "batch");
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_EQ(Axes(*batch), (MeshAxes{{"batch", 4}}));
  EXPECT_THAT(Ids(*batch), ElementsAre(0, 1, 2, 3));

  auto mp = manager->create_model_parallel_mesh(2);
  ASSERT_TRUE(mp.ok()) << mp.status();
  EXPECT_EQ(Axes(*mp), (MeshAxes{{"model", 2}}));

  auto hybrid = manager->create_hybrid_mesh(2, 4);
  ASSERT_TRUE(hybrid.ok()) << hybrid.status();
  EXPECT_EQ(Axes(*hybrid), (MeshAxes{{"data", 2}, {"model", 4}}));
  // Device k at (k // mp, k % mp): row-major ids are 0..7.
  EXPECT_THAT(Ids(*hybrid), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));

  auto custom = manager->create_hybrid_mesh(4, 2, "dp", "tp");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(Axes(*custom), (MeshAxes{{"dp", 4}, {"tp", 2}}));

  auto unit = manager->create_hybrid_mesh();
  ASSERT_TRUE(unit.ok()) << unit.status();
  EXPECT_EQ(Axes(*unit), (MeshAxes{{"data", 1}, {"model", 1}}));
  EXPECT_EQ(manager->create_hybrid_mesh(0, 2).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(ClientMeshesTest, GetMeshInfoListAndDelete) {
  auto manager = DeviceMeshManager::Create(*client_);
  ASSERT_TRUE(manager.ok());
  MeshClient meshes(*client_);
  CreateMeshOptions options;
  options.mesh_id = "grid";
  options.device_ids = {7, 6, 5, 4, 3, 2};
  auto mesh = meshes.Create({{"model", 3}, {"data", 2}}, options);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->id, "grid");
  EXPECT_THAT(Ids(*mesh), ElementsAre(7, 6, 5, 4, 3, 2));

  auto info = manager->get_mesh_info(*mesh);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->total_devices, 6);
  // Axes in mesh order, not alphabetical.
  EXPECT_EQ(info->axes, (MeshAxes{{"model", 3}, {"data", 2}}));
  EXPECT_THAT(Ids(info->mesh), ElementsAre(7, 6, 5, 4, 3, 2));

  CreateMeshOptions same_id;
  same_id.mesh_id = "grid";
  EXPECT_EQ(meshes.Create({{"data", 2}}, same_id).status().code(),
            absl::StatusCode::kAlreadyExists);

  auto list = meshes.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "grid");

  auto deleted = meshes.Delete("grid");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(*deleted, 0);
  EXPECT_EQ(manager->get_mesh_info("grid").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(meshes.Delete("grid").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ClientMeshesTest, DeleteRefusesWhileTensorsUseTheMesh) {
  MeshClient meshes(*client_);
  TensorClient tensors(*client_);
  auto baseline = client_->ListDevices();
  ASSERT_TRUE(baseline.ok());
  auto mesh = meshes.CreateDataParallel(4);
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  std::vector<float> x(16, 1.0f);
  auto t = tensors.Upload(HostArray::Of(x, {16}), Placement::Sharded(*mesh, {{"data"}}));
  ASSERT_TRUE(t.ok()) << t.status();
  auto info = meshes.Get(mesh->id);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->mesh.tensor_count, 1);

  auto refused = meshes.Delete(mesh->id);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(tensors.Describe(t->id).ok());

  auto forced = meshes.Delete(mesh->id, TensorsOnMesh::kDelete);
  ASSERT_TRUE(forced.ok()) << forced.status();
  EXPECT_EQ(*forced, 1);
  EXPECT_EQ(tensors.Describe(t->id).status().code(), absl::StatusCode::kNotFound);
  auto devices = client_->ListDevices();
  ASSERT_TRUE(devices.ok());
  ASSERT_EQ(devices->size(), baseline->size());
  for (size_t i = 0; i < devices->size(); ++i) {
    EXPECT_EQ((*devices)[i].memory_in_use_bytes, (*baseline)[i].memory_in_use_bytes) << i;
  }
}

}  // namespace
}  // namespace placement::client
