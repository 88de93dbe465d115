#include "server/mesh/mesh_registry.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"

namespace placement::server {
namespace {

class MeshRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.num_devices = 8;
    options.device_memory_bytes = 1 << 20;
    backend_ = std::move(CpuBackend::Create(options)).value();
    inventory_ = std::make_unique<DeviceInventory>(backend_.get());
    registry_ = std::make_unique<MeshRegistry>(inventory_.get());
  }

  absl::Status CreateError(std::vector<MeshAxis> axes, std::vector<int64_t> ids = {},
                           std::string id = "") {
    return registry_->Create(std::move(id), std::move(axes), std::move(ids)).status();
  }

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<DeviceInventory> inventory_;
  std::unique_ptr<MeshRegistry> registry_;
};

TEST_F(MeshRegistryTest, CreatesRowMajorMeshesOverTheFirstDevices) {
  auto mesh = registry_->Create("", {{"data", 2}, {"model", 4}}, {});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->id, "mesh-0");
  EXPECT_EQ(mesh->mesh.device_ids(), (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  // Device k sits at (k // mp, k % mp).
  EXPECT_EQ(mesh->mesh.Coordinates(mesh->mesh.PositionOf(6)), (std::vector<int64_t>{1, 2}));
  auto fewer = registry_->Create("", {{"data", 3}}, {});
  ASSERT_TRUE(fewer.ok());
  EXPECT_EQ(fewer->id, "mesh-1");
  EXPECT_EQ(fewer->mesh.device_ids(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(registry_->size(), 2);
}

TEST_F(MeshRegistryTest, NotEnoughDevicesNamesBothNumbers) {
  absl::Status status = CreateError({{"data", 4}, {"model", 4}});
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(status.message(), "Not enough devices: mesh requires 16 devices but only 8 available.");
  // Malformed names are still reported as such.
  EXPECT_EQ(CreateError({{"9x", 16}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"x", 16}}, {0, 1}).code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(MeshRegistryTest, RejectsBadAxes) {
  EXPECT_EQ(CreateError({}).code(), absl::StatusCode::kInvalidArgument);
  for (int64_t size : {0, -1}) {
    absl::Status status = CreateError({{"data", size}});
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(status.message().find(std::to_string(size)), std::string::npos) << status;
  }
  EXPECT_EQ(CreateError({{"x", 2}, {"x", 2}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"", 2}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"a b", 2}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"x", int64_t{1} << 40}}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry_->size(), 0);
}

TEST_F(MeshRegistryTest, ExplicitDeviceIds) {
  auto mesh = registry_->Create("", {{"x", 2}, {"y", 2}}, {3, 1, 0, 2});
  ASSERT_TRUE(mesh.ok()) << mesh.status();
  EXPECT_EQ(mesh->mesh.device_ids(), (std::vector<int64_t>{3, 1, 0, 2}));
  absl::Status unknown = CreateError({{"x", 2}}, {1, 42});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("device_ids[1]"), std::string::npos) << unknown;
  EXPECT_NE(unknown.message().find("42"), std::string::npos);
  EXPECT_EQ(CreateError({{"x", 2}}, {1, 1}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"x", 2}}, {1, 2, 3}).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(MeshRegistryTest, IdsGetListDelete) {
  ASSERT_TRUE(registry_->Create("mesh-0", {{"x", 1}}, {}).ok());
  auto generated = registry_->Create("", {{"x", 1}}, {});
  ASSERT_TRUE(generated.ok());
  EXPECT_EQ(generated->id, "mesh-1");  // mesh-0 is taken
  EXPECT_EQ(CreateError({{"x", 1}}, {}, "mesh-0").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(CreateError({{"x", 1}}, {}, "bad id!").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CreateError({{"x", 1}}, {}, std::string(65, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry_->Create("alpha", {{"x", 2}}, {}).ok());
  std::vector<std::string> ids;
  for (const auto& m : registry_->List()) ids.push_back(m.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"alpha", "mesh-0", "mesh-1"}));
  auto missing = registry_->Get("nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "mesh 'nope' does not exist");
  EXPECT_TRUE(registry_->Delete("alpha").ok());
  EXPECT_EQ(registry_->Delete("alpha").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_->size(), 2);
}

MeshPreset OneAxis(MeshPresetKind kind, std::optional<int64_t> n, std::string name = "") {
  MeshPreset p;
  p.kind = kind;
  p.num_devices = n;
  p.axis_name = std::move(name);
  return p;
}

TEST_F(MeshRegistryTest, Presets) {
  auto all =
      registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kDataParallel, std::nullopt), {});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->mesh.axes(), (std::vector<MeshAxis>{{"data", 8}}));
  auto four =
      registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kDataParallel, 4, "batch"), {});
  ASSERT_TRUE(four.ok());
  EXPECT_EQ(four->mesh.axes(), (std::vector<MeshAxis>{{"batch", 4}}));
  auto model =
      registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kModelParallel, std::nullopt), {});
  ASSERT_TRUE(model.ok());
  EXPECT_EQ(model->mesh.axes(), (std::vector<MeshAxis>{{"model", 8}}));
  // Unset num_devices with explicit devices = those devices.
  auto on_ids =
      registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kDataParallel, std::nullopt), {6, 7});
  ASSERT_TRUE(on_ids.ok());
  EXPECT_EQ(on_ids->mesh.axes(), (std::vector<MeshAxis>{{"data", 2}}));
  EXPECT_EQ(on_ids->mesh.device_ids(), (std::vector<int64_t>{6, 7}));

  absl::Status zero =
      registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kDataParallel, 0), {}).status();
  EXPECT_EQ(zero.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(zero.message(), "data_parallel.num_devices is 0; it must be >= 1");
  EXPECT_EQ(registry_->CreateFromPreset("", OneAxis(MeshPresetKind::kModelParallel, 16), {})
                .status()
                .message(),
            "Not enough devices: mesh requires 16 devices but only 8 available.");

  MeshPreset hybrid;
  hybrid.kind = MeshPresetKind::kHybrid;
  auto unit = registry_->CreateFromPreset("", hybrid, {});
  ASSERT_TRUE(unit.ok());
  EXPECT_EQ(unit->mesh.axes(), (std::vector<MeshAxis>{{"data", 1}, {"model", 1}}));
  EXPECT_EQ(unit->mesh.device_ids(), (std::vector<int64_t>{0}));
  hybrid.data_parallel_size = 2;
  hybrid.model_parallel_size = 4;
  hybrid.data_axis = "dp";
  hybrid.model_axis = "tp";
  auto custom = registry_->CreateFromPreset("", hybrid, {});
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(custom->mesh.axes(), (std::vector<MeshAxis>{{"dp", 2}, {"tp", 4}}));
  hybrid.model_axis = "dp";
  EXPECT_EQ(registry_->CreateFromPreset("", hybrid, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  hybrid.model_axis = "tp";
  hybrid.model_parallel_size = -2;
  EXPECT_EQ(registry_->CreateFromPreset("", hybrid, {}).status().message(),
            "hybrid.model_parallel_size is -2; it must be >= 1");
}

TEST_F(MeshRegistryTest, ConcurrentCreatesGetDistinctIds) {
  std::vector<std::thread> threads;
  std::vector<std::vector<std::string>> ids(8);
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        auto mesh = registry_->Create("", {{"x", 1 + (i % 8)}}, {});
        if (mesh.ok()) ids[t].push_back(mesh->id);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<std::string> all;
  for (const auto& v : ids) all.insert(v.begin(), v.end());
  EXPECT_EQ(all.size(), 400u);
  EXPECT_EQ(registry_->size(), 400);
}

}  // namespace
}  // namespace placement::server
