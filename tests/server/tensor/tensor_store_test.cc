#include "server/tensor/tensor_store.h"

#include <atomic>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::PatternBytes;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;

std::shared_ptr<const Tensor> Make(TestRig& rig, const std::string& name, int64_t device = 0,
                                   std::string mesh_id = "") {
  auto tensor = rig.store->Allocate(DType::kF32, {4}, NamedSharding::SingleDevice(device),
                                    std::move(mesh_id), name, "");
  EXPECT_TRUE(tensor.ok()) << tensor.status();
  return rig.store->Commit(std::move(*tensor));
}

TEST(TensorStoreTest, IdsAreUnguessableAndUnique) {
  TestRig rig;
  std::set<std::string> ids;
  for (int i = 0; i < 100; ++i) {
    auto t = Make(rig, "");
    EXPECT_TRUE(std::regex_match(t->id, std::regex("t-[0-9a-f]{32}"))) << t->id;
    ids.insert(t->id);
  }
  EXPECT_EQ(ids.size(), 100u);
  EXPECT_EQ(rig.store->size(), 100);
}

TEST(TensorStoreTest, GetAndDeleteAreAllOrNothing) {
  TestRig rig;
  auto a = Make(rig, "a", 0), b = Make(rig, "b", 1);
  auto missing = rig.store->Get("t-0");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "tensor 't-0' does not exist");
  auto many = rig.store->GetMany({a->id, "t-x", b->id});
  EXPECT_EQ(many.status().message(), "tensor 't-x' does not exist");
  auto partial = rig.store->Delete({a->id, "t-x", b->id});
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rig.store->size(), 2);
  const std::string a_id = a->id, b_id = b->id;
  a.reset();
  b.reset();
  auto freed = rig.store->Delete({a_id, b_id, a_id});
  ASSERT_TRUE(freed.ok());
  EXPECT_EQ(*freed, 32);
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ(*rig.store->Delete({}), 0);
}

TEST(TensorStoreTest, DeleteExistingSkipsWhatIsGoneAndTellsTheClusterOnce) {
  TestRig rig;
  std::vector<std::vector<std::string>> told;
  TensorStoreHooks hooks;
  hooks.on_delete = [&](const std::vector<std::string>& ids) { told.push_back(ids); };
  rig.store->set_hooks(std::move(hooks));
  auto a = Make(rig, "a", 0), b = Make(rig, "b", 1), c = Make(rig, "c", 2);
  const std::string a_id = a->id, b_id = b->id, c_id = c->id;
  a.reset();
  b.reset();
  c.reset();
  ASSERT_TRUE(rig.store->Delete({b_id}).ok());
  told.clear();
  EXPECT_EQ(rig.store->DeleteExisting({a_id, b_id, "t-0", c_id, a_id}),
            (std::vector<std::string>{a_id, c_id}));
  EXPECT_EQ(told, (std::vector<std::vector<std::string>>{{a_id, c_id}}));
  EXPECT_EQ(rig.store->size(), 0);
  EXPECT_EQ(rig.MemoryInUse(), 0);
  // Nothing left to delete: nothing to tell.
  EXPECT_TRUE(rig.store->DeleteExisting({a_id, "t-0"}).empty());
  EXPECT_EQ(told.size(), 1u);
}

TEST(TensorStoreTest, CountsAndRetainsOnlyCommittedIds) {
  TestRig rig;
  auto a = Make(rig, "a", 0), b = Make(rig, "b", 1);
  EXPECT_EQ(rig.store->CountExisting({a->id}), 1);
  EXPECT_EQ(rig.store->CountExisting({"t-0"}), 0);
  ASSERT_TRUE(rig.store->Delete({b->id}).ok());
  absl::flat_hash_set<std::string> ids = {a->id, b->id, "t-0"};
  EXPECT_EQ(rig.store->CountExisting(ids), 1);
  rig.store->RetainExisting(&ids);
  EXPECT_EQ(ids, absl::flat_hash_set<std::string>({a->id}));
}

TEST(TensorStoreTest, DeletedTensorIsFreedWhenTheLastReaderLetsGo) {
  TestRig rig;
  auto t = Make(rig, "x");
  ASSERT_TRUE(rig.store->Delete({t->id}).ok());
  EXPECT_EQ(rig.MemoryInUse(), 16);
  t.reset();
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(TensorStoreTest, ListFiltersAndSorts) {
  TestRig rig;
  const std::string m = rig.CreateMesh({{"r", 2}});
  Make(rig, "batch/labels");
  Make(rig, "batch/images");
  Make(rig, "weights");
  auto registered = rig.meshes->Get(m);
  ASSERT_TRUE(registered.ok());
  auto on_mesh = rig.store->Allocate(DType::kU8, {2}, NamedSharding::Replicated(registered->mesh),
                                     m, "batch/z", "");
  ASSERT_TRUE(on_mesh.ok());
  rig.store->Commit(std::move(*on_mesh));
  std::vector<std::string> names;
  for (const auto& t : rig.store->List({"batch/", ""})) names.push_back(t->name);
  EXPECT_EQ(names, (std::vector<std::string>{"batch/images", "batch/labels", "batch/z"}));
  EXPECT_EQ(rig.store->List({"", m}).size(), 1u);
  EXPECT_EQ(rig.store->List().size(), 4u);
  EXPECT_EQ(rig.store->CountUsingMesh(m), 1);
  EXPECT_EQ(rig.store->DeleteUsingMesh(m), 1);
  EXPECT_EQ(rig.store->size(), 3);
}

TEST(TensorStoreTest, DonationNeedsExclusiveOwnership) {
  TestRig rig;
  auto a = Make(rig, "a"), b = Make(rig, "b");
  const std::string a_id = a->id, b_id = b->id;
  auto busy = rig.store->TakeAllForDonation({a_id, b_id});
  EXPECT_EQ(busy.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.status().message().find("in use by 1"), std::string::npos) << busy.status();
  a.reset();
  EXPECT_EQ(rig.store->TakeAllForDonation({a_id, b_id}).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.store->size(), 2);  // nothing left the store
  EXPECT_EQ(rig.store->TakeAllForDonation({a_id, a_id}).status().code(),
            absl::StatusCode::kInvalidArgument);
  b.reset();
  auto taken = rig.store->TakeAllForDonation({a_id, b_id});
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(rig.store->size(), 0);
  EXPECT_EQ((*taken)[0]->id, a_id);
  EXPECT_EQ(rig.MemoryInUse(), 32);
  taken->clear();
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(TensorStoreTest, AllocateReportsBudgetsAndBadShardings) {
  TestRig rig(/*num_devices=*/2, /*device_memory=*/100);
  auto big = rig.store->Allocate(DType::kF32, {30}, NamedSharding::SingleDevice(1), "", "", "");
  EXPECT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(big.status().message().find("f32[30]"), std::string::npos) << big.status();
  auto missing = rig.store->Allocate(DType::kF32, {3}, NamedSharding::SingleDevice(9), "", "", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto mesh = Mesh::Create({{"r", 2}}, {0, 1});
  auto sharding = NamedSharding::Create(*mesh, PartitionSpec{{{"r"}}});
  auto odd = rig.store->Allocate(DType::kF32, {3}, *sharding, "", "", "");
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(TensorStoreTest, DeleteMeshRefusesWhileTensorsUseItUnlessForced) {
  TestRig rig;
  const std::string m = rig.CreateMesh({{"r", 4}}, {}, "m");
  auto t = UploadBytes(*rig.ops, DType::kU8, {4}, ReplicatedRule(m), PatternBytes(4));
  ASSERT_TRUE(t.ok());
  t->reset();
  auto refused = rig.ops->DeleteMesh(m, /*force=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("used by 1 tensor"), std::string::npos);
  EXPECT_TRUE(rig.meshes->Get(m).ok());
  EXPECT_EQ(*rig.ops->DeleteMesh(m, /*force=*/true), 1);
  EXPECT_EQ(rig.meshes->Get(m).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ(rig.ops->DeleteMesh(m, true).status().code(), absl::StatusCode::kNotFound);
  const std::string empty = rig.CreateMesh({{"r", 2}});
  EXPECT_EQ(*rig.ops->DeleteMesh(empty, false), 0);
}

TEST(TensorStoreTest, ConcurrentUploadsDownloadsAndDeletes) {
  TestRig rig;
  const std::string m = rig.CreateMesh({{"x", 2}, {"y", 4}});
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) {
        const std::string data = PatternBytes(8 * 16 * 4, t * 100 + i);
        auto rule = (i % 2) ? ShardingRule(m, {{"x"}, {"y"}}) : DeviceRule(t);
        auto tensor = UploadBytes(*rig.ops, DType::kF32, {8, 16}, rule, data, 50);
        if (!tensor.ok()) {
          ++failures;
          continue;
        }
        auto back = testing::DownloadWhole(*rig.ops, (*tensor)->id, 33);
        if (!back.ok() || *back != data) ++failures;
        if (!rig.store->Delete({(*tensor)->id}).ok()) ++failures;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(rig.store->size(), 0);
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

}  // namespace
}  // namespace placement::server
