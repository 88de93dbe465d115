// Shared helpers for the tensor unit tests: a real CpuBackend with its
// inventory, mesh registry, store and TensorOps; deterministic byte patterns;
// a naive (element-by-element, independent of common/region) box extractor
// to check shard contents; upload and download helpers.
#ifndef PLACEMENT_TESTS_SERVER_TENSOR_TENSOR_TEST_UTIL_H_
#define PLACEMENT_TESTS_SERVER_TENSOR_TENSOR_TEST_UTIL_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "placement/v1/tensor_service.pb.h"
#include "server/device/device_inventory.h"
#include "server/mesh/mesh_registry.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/service/from_proto.h"
#include "server/tensor/download_plan.h"
#include "server/tensor/tensor_ops.h"
#include "server/tensor/tensor_store.h"

namespace placement::server::testing {

namespace pb = placement::v1;

// One daemon's worth of real components over CPU virtual devices.
struct TestRig {
  explicit TestRig(int num_devices = 8, int64_t device_memory = int64_t{64} << 20,
                   int64_t max_bytes_per_owner = 0) {
    CpuBackendOptions options;
    options.num_devices = num_devices;
    options.device_memory_bytes = device_memory;
    backend = std::move(CpuBackend::Create(options)).value();
    inventory = std::make_unique<DeviceInventory>(backend.get());
    meshes = std::make_unique<MeshRegistry>(inventory.get());
    store = std::make_unique<TensorStore>(backend.get(), TensorStoreOptions{max_bytes_per_owner});
    ops = std::make_unique<TensorOps>(store.get(), meshes.get());
  }

  int64_t MemoryInUse() const { return inventory->TotalMemoryInUse(); }

  std::string CreateMesh(std::vector<MeshAxis> axes, std::vector<int64_t> devices = {},
                         std::string id = "") {
    absl::StatusOr<RegisteredMesh> mesh = meshes->Create(id, std::move(axes), std::move(devices));
    EXPECT_TRUE(mesh.ok()) << mesh.status();
    return mesh.ok() ? mesh->id : "";
  }

  std::unique_ptr<CpuBackend> backend;
  std::unique_ptr<DeviceInventory> inventory;
  std::unique_ptr<MeshRegistry> meshes;
  std::unique_ptr<TensorStore> store;
  std::unique_ptr<TensorOps> ops;
};

// Deterministic, position-dependent bytes (no period that aligns with rows).
inline std::string PatternBytes(int64_t n, uint32_t seed = 1) {
  std::string out(static_cast<size_t>(n), '\0');
  uint32_t x = seed * 2654435761u + 12345u;
  for (int64_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    out[static_cast<size_t>(i)] = static_cast<char>(x >> 24);
  }
  return out;
}

// The bytes of `box` from a row-major global array, element by element.
inline std::string ExtractBox(const std::string& global, const Shape& shape, const Box& box,
                              int64_t elem) {
  std::string out;
  const size_t rank = shape.size();
  int64_t count = 1;
  for (const IndexRange& r : box) count *= r.end - r.begin;
  if (count <= 0) return out;
  std::vector<int64_t> idx(rank);
  for (size_t d = 0; d < rank; ++d) idx[d] = box[d].begin;
  for (int64_t n = 0; n < count; ++n) {
    int64_t linear = 0;
    for (size_t d = 0; d < rank; ++d) linear = linear * shape[d] + idx[d];
    out.append(global, static_cast<size_t>(linear * elem), static_cast<size_t>(elem));
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < box[d].end) break;
      idx[d] = box[d].begin;
    }
  }
  return out;
}

// The bytes of one CPU shard buffer.
inline std::string ShardBytes(const Shard& shard) {
  return std::string(static_cast<const char*>(shard.buffer->data()),
                     static_cast<size_t>(shard.buffer->size()));
}

// Expects every shard of `tensor` to hold exactly its box of `global`.
inline void ExpectShardsMatch(const Tensor& tensor, const std::string& global) {
  for (const Shard& shard : tensor.shards) {
    EXPECT_EQ(ShardBytes(shard),
              ExtractBox(global, tensor.shape, shard.domain.box, DTypeSize(tensor.dtype)))
        << "device " << shard.domain.device_id << " box " << BoxToString(shard.domain.box);
  }
}

// The core form of wire rules, converted as the handlers convert them
// (server/service/from_proto.h); a conversion error fails the test.
inline PlacementRule Core(const pb::PlacementRule& rule) {
  absl::StatusOr<PlacementRule> core = PlacementRuleFromProto(rule);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : PlacementRule();
}
inline TensorPlacement Core(const pb::Placement& placement) {
  absl::StatusOr<TensorPlacement> core = PlacementFromProto(placement);
  EXPECT_TRUE(core.ok()) << core.status();
  return core.ok() ? *std::move(core) : TensorPlacement();
}

// Wire rules as the tests write them; they convert implicitly to the core's
// form (Core) where TensorOps takes one.
struct TestPlacement {
  pb::Placement proto;
  operator const pb::Placement&() const { return proto; }   // NOLINT
  operator TensorPlacement() const { return Core(proto); }  // NOLINT
};
struct TestRule {
  pb::PlacementRule proto;
  operator const pb::PlacementRule&() const { return proto; }  // NOLINT
  operator PlacementRule() const { return Core(proto); }       // NOLINT
  TestPlacement placement() const { return TestPlacement{proto.placement()}; }
  pb::Placement* mutable_placement() { return proto.mutable_placement(); }
};

inline TestRule DeviceRule(int64_t device) {
  TestRule rule;
  rule.proto.mutable_placement()->set_device_id(device);
  return rule;
}

// A Placement rule with a sharding over `mesh_id`; `spec` lists the axes of
// each dimension ({} = None).
inline TestRule ShardingRule(const std::string& mesh_id,
                             const std::vector<std::vector<std::string>>& spec,
                             pb::ShardingMode mode = pb::SHARDING_MODE_EVEN,
                             const std::vector<std::string>& partial_axes = {}) {
  TestRule rule;
  pb::Sharding* sharding = rule.proto.mutable_placement()->mutable_sharding();
  sharding->set_mesh_id(mesh_id);
  for (const auto& axes : spec) {
    pb::DimSharding* dim = sharding->mutable_spec()->add_dims();
    for (const auto& a : axes) dim->add_axes(a);
  }
  sharding->set_mode(mode);
  for (const auto& a : partial_axes) sharding->add_partial_axes(a);
  return rule;
}

inline TestRule ReplicatedRule(const std::string& mesh_id) {
  TestRule rule;
  rule.proto.mutable_placement()->set_replicated_mesh_id(mesh_id);
  return rule;
}

// Uploads `bytes` in chunks of `chunk` bytes.
inline absl::StatusOr<std::shared_ptr<const Tensor>> UploadBytes(
    const TensorOps& ops, DType dtype, Shape shape, const pb::PlacementRule& rule,
    const std::string& bytes, int64_t chunk = 1 << 20, std::string name = "") {
  absl::StatusOr<std::unique_ptr<UploadSession>> session =
      ops.StartUpload(TensorSpec{dtype, std::move(shape), std::move(name), ""}, Core(rule));
  if (!session.ok()) return session.status();
  for (int64_t offset = 0; offset < static_cast<int64_t>(bytes.size()); offset += chunk) {
    absl::Status status = (*session)->Write(absl::string_view(bytes).substr(offset, chunk));
    if (!status.ok()) return status;
  }
  return (*session)->Commit();
}

// Streams a whole download plan in chunks of `chunk` bytes.
inline absl::StatusOr<std::string> ReadPlan(DownloadPlan& plan, int64_t chunk = 1 << 20) {
  std::string out(static_cast<size_t>(plan.total_bytes()), '\0');
  for (int64_t offset = 0; offset < plan.total_bytes(); offset += chunk) {
    const int64_t n = std::min(chunk, plan.total_bytes() - offset);
    absl::Status status = plan.Read(offset, n, out.data() + offset);
    if (!status.ok()) return status;
  }
  return out;
}

inline absl::StatusOr<std::string> DownloadWhole(const TensorOps& ops, const std::string& id,
                                                 int64_t chunk = 1 << 20) {
  absl::StatusOr<std::unique_ptr<DownloadPlan>> plan = ops.OpenDownload(id, DownloadSelection{});
  if (!plan.ok()) return plan.status();
  return ReadPlan(**plan, chunk);
}

}  // namespace placement::server::testing

#endif  // PLACEMENT_TESTS_SERVER_TENSOR_TENSOR_TEST_UTIL_H_
