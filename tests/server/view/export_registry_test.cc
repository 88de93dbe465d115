// ExportRegistry over a real CpuBackend and TensorStore: who sees an export
// (tenant, session, admin), a session's tensors exported only within it,
// single-use tokens handing over one fd per shard, the bounds, and every way
// an export ends (Unexport, session end, an unredeemed token's expiry,
// destruction) -- each releasing the tensor's memory once it was deleted.
#include "server/view/export_registry.h"

#include <unistd.h>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/platform/cpu/cpu_backend.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

class ExportRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CpuBackendOptions options;
    options.num_devices = 4;
    options.device_memory_bytes = 64 << 20;
    options.cache_bytes_per_device = 0;
    backend_ = *CpuBackend::Create(options);
    store_ = std::make_unique<TensorStore>(backend_.get(), TensorStoreOptions{});
  }

  std::unique_ptr<ExportRegistry> Registry(ExportOptions options = {}, bool fd_passing = true) {
    auto registry = std::make_unique<ExportRegistry>(backend_.get(), nullptr, fd_passing, options);
    registry->set_sessions(
        [this](const std::string& id) { return sessions_.contains(id) ? sessions_[id] : ""; },
        [this](const std::string& id) { return !closed_.contains(id); });
    return registry;
  }

  // f32[rows, 1024] over `devices` devices (row-sharded), committed.
  std::shared_ptr<const Tensor> Make(int64_t rows, int devices, const std::string& tenant = "a") {
    std::vector<int64_t> ids;
    for (int i = 0; i < devices; ++i) ids.push_back(i);
    Mesh mesh = *Mesh::Create({{"x", devices}}, ids);
    auto sharding = NamedSharding::Create(mesh, PartitionSpec{{{"x"}}});
    auto tensor =
        store_->Allocate(DType::kF32, {rows, 1024}, *sharding, "", "", TensorOwner(tenant, ""));
    EXPECT_TRUE(tensor.ok()) << tensor.status();
    return store_->Commit(*std::move(tensor));
  }

  int64_t InUse() const {
    int64_t total = 0;
    for (const auto& d : backend_->Devices()) total += backend_->MemoryInUse(d.id);
    return total;
  }

  static Caller As(const std::string& tenant, const std::string& session = "",
                   Role role = Role::kUser) {
    Caller caller;
    caller.tenant = tenant;
    caller.session_id = session;
    caller.role = role;
    return caller;
  }

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<TensorStore> store_;
  absl::flat_hash_map<std::string, std::string> sessions_;  // tensor -> session
  absl::flat_hash_set<std::string> closed_;
};

TEST_F(ExportRegistryTest, AnExportIsItsTenantsAndSessionsOnly) {
  auto registry = Registry();
  auto exported = registry->Export(As("a", "s1"), Make(256, 2), {});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->num_shards, 2);
  EXPECT_EQ(exported->bytes, 256 * 1024 * 4);
  EXPECT_EQ(exported->fd_token.size(), 32u);
  ASSERT_EQ(exported->shards.size(), 2u);
  EXPECT_EQ(exported->shards[1].fd_index, 1);
  EXPECT_FALSE(exported->shards[1].copied);
  EXPECT_EQ(registry->List(As("a", "s1")).size(), 1u);
  EXPECT_TRUE(registry->List(As("a", "s2")).empty());
  EXPECT_TRUE(registry->List(As("a")).empty());
  EXPECT_TRUE(registry->List(As("b", "s1")).empty());
  EXPECT_EQ(registry->List(As("root", "", Role::kAdmin)).size(), 1u);
  const absl::Status other = registry->Unexport(As("b", "s1"), exported->id);
  EXPECT_TRUE(absl::IsNotFound(other));
  EXPECT_THAT(other.message(), HasSubstr("no such export"));
  EXPECT_TRUE(absl::IsNotFound(registry->Unexport(As("a", "s2"), exported->id)));
  EXPECT_EQ(registry->TotalsFor(As("a")).exports, 1);
  EXPECT_EQ(registry->TotalsFor(As("b")).exports, 0);
  EXPECT_TRUE(registry->Unexport(As("a", "s1"), exported->id).ok());
  EXPECT_EQ(registry->size(), 0);
  EXPECT_EQ(registry->TotalsFor(As("a")).bytes, 256 * 1024 * 4);  // totals stay
}

TEST_F(ExportRegistryTest, ASessionsTensorIsExportedOnlyWithinIt) {
  auto registry = Registry();
  auto tensor = Make(8, 1);
  sessions_[tensor->id] = "s-1";
  auto outside = registry->Export(As("a"), tensor, {});
  ASSERT_TRUE(absl::IsNotFound(outside.status())) << outside.status();
  EXPECT_THAT(outside.status().message(),
              HasSubstr("belongs to session 's-1', which this call did not join"));
  auto other = registry->Export(As("a", "s-2"), tensor, {});
  EXPECT_THAT(other.status().message(), HasSubstr("is not in (it joined 's-2')"));
  auto inside = registry->Export(As("a", "s-1"), tensor, {});
  ASSERT_TRUE(inside.ok()) << inside.status();
  EXPECT_TRUE(inside->shards[0].copied);  // 32 KiB: a private copy
  // The session ended during the call: nothing kept.
  closed_.insert("s-1");
  auto late = registry->Export(As("a", "s-1"), tensor, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(late.status())) << late.status();
  EXPECT_EQ(registry->size(), 0);
}

TEST_F(ExportRegistryTest, ATokenHandsOverOneFdPerShardOnce) {
  auto registry = Registry();
  auto exported = registry->Export(As("a"), Make(512, 4), {3, 0});
  ASSERT_TRUE(exported.ok()) << exported.status();
  EXPECT_EQ(exported->shards[0].shard_index, 3);
  auto fds = registry->Redeem(exported->fd_token, PeerProcess::Self());
  ASSERT_TRUE(fds.ok()) << fds.status();
  EXPECT_EQ(fds->size(), 2u);
  for (int fd : *fds) close(fd);
  EXPECT_EQ(registry->List(As("a"))[0].reader_pid, getpid());
  auto again = registry->Redeem(exported->fd_token, PeerProcess::Self());
  EXPECT_TRUE(absl::IsNotFound(again.status()));
  EXPECT_THAT(again.status().message(), HasSubstr("already redeemed"));
}

TEST_F(ExportRegistryTest, ShardSelectionsAndBoundsAreChecked) {
  ExportOptions options;
  options.max_exports = 3;
  options.max_exports_per_tenant = 2;
  auto registry = Registry(options);
  auto tensor = Make(64, 4);
  auto range = registry->Export(As("a"), tensor, {4});
  EXPECT_TRUE(absl::IsInvalidArgument(range.status()));
  EXPECT_THAT(range.status().message(), HasSubstr("shard_indices[0] = 4 is out of range"));
  auto repeat = registry->Export(As("a"), tensor, {2, 2});
  EXPECT_THAT(repeat.status().message(), HasSubstr("shard_indices[1] = 2 is repeated"));
  ASSERT_TRUE(registry->Export(As("a"), tensor, {}).ok());
  ASSERT_TRUE(registry->Export(As("a"), tensor, {}).ok());
  auto tenant = registry->Export(As("a"), tensor, {});
  EXPECT_TRUE(absl::IsResourceExhausted(tenant.status()));
  EXPECT_THAT(tenant.status().message(), HasSubstr("2 of --tenant_max_exports=2"));
  ASSERT_TRUE(registry->Export(As("b"), Make(8, 1, "b"), {}).ok());
  auto total = registry->Export(As("c"), Make(8, 1, "c"), {});
  EXPECT_THAT(total.status().message(), HasSubstr("3 of --max_exports=3 are open"));
  auto off = Registry({}, /*fd_passing=*/false)->Export(As("a"), tensor, {});
  EXPECT_TRUE(absl::IsFailedPrecondition(off.status()));
}

TEST_F(ExportRegistryTest, EveryEndReleasesADeletedTensorsMemory) {
  ExportOptions options;
  options.redeem_ttl = absl::Milliseconds(50);
  auto registry = Registry(options);
  const int64_t baseline = InUse();
  auto tensor = Make(256, 2);
  const std::string id = tensor->id;
  auto redeemed = registry->Export(As("a", "s"), tensor, {});
  auto unredeemed = registry->Export(As("a"), tensor, {});
  ASSERT_TRUE(redeemed.ok() && unredeemed.ok());
  auto fds = registry->Redeem(redeemed->fd_token, PeerProcess::Self());
  ASSERT_TRUE(fds.ok());
  for (int fd : *fds) close(fd);
  tensor.reset();
  ASSERT_TRUE(store_->Delete({id}).ok());
  const int64_t held = InUse();
  EXPECT_GT(held, baseline);
  // The unredeemed token expires (the background thread ends it) ...
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (registry->size() > 1 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(registry->size(), 1);
  EXPECT_EQ(InUse(), held);  // the redeemed export still holds the tensor
  // ... and the session's end takes the other, and the memory with it. (The
  // expiry thread destroys the expired record after it left the registry,
  // unlocked: that reference can outlive size() by a moment, seen once
  // under ASan.)
  EXPECT_EQ(registry->EndSession("s"), 1);
  EXPECT_EQ(registry->size(), 0);
  const absl::Time released_by = absl::Now() + absl::Seconds(10);
  while (InUse() != baseline && absl::Now() < released_by) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(InUse(), baseline);
  // Destruction ends what is left.
  auto last = registry->Export(As("a"), Make(256, 2), {});
  ASSERT_TRUE(last.ok());
  store_->Delete({last->tensor_id}).IgnoreError();
  registry.reset();
  EXPECT_EQ(InUse(), baseline);
}

}  // namespace
}  // namespace placement::server
