#include "server/tensor/resharder.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::DownloadWhole;
using testing::ExpectShardsMatch;
using testing::PatternBytes;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;
namespace pb = placement::v1;

pb::PlacementRule ReplicateOn(std::vector<int64_t> devices) {
  pb::PlacementRule rule;
  for (int64_t d : devices) rule.mutable_replicate()->add_device_ids(d);
  return rule;
}

// Places the tensor through every rule in turn (donating each intermediate),
// checking every step's shards and whole bytes, and ends where it started.
void RunChain(TestRig& rig, DType dtype, const Shape& shape,
              const std::vector<pb::PlacementRule>& rules) {
  const std::string data = PatternBytes(ByteSize(dtype, shape), 11);
  auto first = UploadBytes(*rig.ops, dtype, shape, rules.front(), data, 37);
  ASSERT_TRUE(first.ok()) << first.status();
  const int64_t baseline = rig.MemoryInUse();
  std::string id = (*first)->id;
  first->reset();
  for (size_t step = 1; step <= rules.size(); ++step) {
    const pb::PlacementRule& rule = rules[step % rules.size()];
    SCOPED_TRACE("step " + std::to_string(step) + ": " + rule.ShortDebugString());
    auto placed = rig.ops->Place({id}, testing::Core(rule), SourceHandling::kDonate, "");
    ASSERT_TRUE(placed.ok()) << placed.status();
    ASSERT_EQ(placed->size(), 1u);
    EXPECT_EQ(rig.store->Get(id).status().code(), absl::StatusCode::kNotFound);
    id = placed->front()->id;
    ExpectShardsMatch(*placed->front(), data);
    auto back = DownloadWhole(*rig.ops, id, 29);
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(*back, data);
  }
  EXPECT_EQ(rig.MemoryInUse(), baseline);  // back to the first placement
  ASSERT_TRUE(rig.store->Delete({id}).ok());
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(ResharderTest, EvenChainReturnsToTheOriginalBytes) {
  TestRig rig;
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}});
  const std::string yx = rig.CreateMesh({{"y", 4}, {"x", 2}}, {6, 4, 2, 0, 7, 5, 3, 1});
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  RunChain(rig, DType::kF32, {8, 12},
           {DeviceRule(0), ShardingRule(xy, {{"x"}, {"y"}}), ShardingRule(xy, {{}, {"y"}}),
            ShardingRule(yx, {{"y", "x"}}), ShardingRule(xy, {{"y"}, {"x"}}), ReplicatedRule(r8),
            ShardingRule(r8, {{"r"}}), ShardingRule(yx, {{"x"}, {"y"}}), DeviceRule(7),
            ReplicateOn({3, 5}), ShardingRule(xy, {{"x", "y"}})});
}

TEST(ResharderTest, PaddedChainReturnsToTheOriginalBytes) {
  TestRig rig;
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}});
  const std::string r3 = rig.CreateMesh({{"r", 3}}, {5, 1, 6});
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  const auto padded = pb::SHARDING_MODE_PADDED;
  RunChain(
      rig, DType::kBF16, {7, 5, 3},
      {DeviceRule(2), ShardingRule(xy, {{"x"}, {"y"}}, padded),
       ShardingRule(r3, {{}, {"r"}}, padded), ShardingRule(r8, {{"r"}}, padded),
       ShardingRule(xy, {{"y", "x"}, {}, {}}, padded), ReplicatedRule(r3),
       ShardingRule(r8, {{}, {}, {"r"}}, padded), ShardingRule(xy, {{}, {"x"}, {"y"}}, padded)});
}

TEST(ResharderTest, ScalarsAndRankOne) {
  TestRig rig;
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  RunChain(rig, DType::kI64, {}, {DeviceRule(1), ReplicatedRule(r8), DeviceRule(4)});
  RunChain(rig, DType::kBool, {24}, {ShardingRule(r8, {{"r"}}), DeviceRule(6), ReplicatedRule(r8)});
}

TEST(ResharderTest, FailureLeavesTheSourceIntactAndFreesThePartialResult) {
  // 12 KiB per device; a CPU buffer is charged its pages and a 2 KiB record:
  // a 2 KiB shard 6 KiB, an 8 KiB replica 10 KiB.
  TestRig rig(/*num_devices=*/4, /*device_memory=*/12288);
  const std::string r4 = rig.CreateMesh({{"r", 4}});
  const std::string data = PatternBytes(8192);
  auto source = UploadBytes(*rig.ops, DType::kF32, {2048}, ShardingRule(r4, {{"r"}}), data);
  ASSERT_TRUE(source.ok()) << source.status();
  EXPECT_EQ(rig.MemoryInUse(), 8192);
  // Replicating needs 10 KiB more per device: fails; the source survives, even with donation.
  auto placed = rig.ops->Place({(*source)->id}, ReplicatedRule(r4), SourceHandling::kDonate, "");
  EXPECT_EQ(placed.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(placed.status().message().find((*source)->id), std::string::npos) << placed.status();
  EXPECT_EQ(rig.MemoryInUse(), 8192);
  EXPECT_EQ(*DownloadWhole(*rig.ops, (*source)->id), data);
  // Two tensors at once, the second fails: nothing new is kept.
  auto small = UploadBytes(*rig.ops, DType::kU8, {16}, DeviceRule(0), PatternBytes(16));
  ASSERT_TRUE(small.ok());
  auto both =
      rig.ops->Place({(*small)->id, (*source)->id}, DeviceRule(1), SourceHandling::kKeep, "");
  EXPECT_EQ(both.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rig.MemoryInUse(), 8192 + 16);
  EXPECT_EQ(rig.store->size(), 2);
}

TEST(ResharderTest, PlaceGroupsDeriveNamesAndRejectBadRequests) {
  TestRig rig;
  const std::string dp = rig.CreateMesh({{"data", 8}});
  auto images = UploadBytes(*rig.ops, DType::kF32, {8, 2, 2}, DeviceRule(0), PatternBytes(128),
                            1 << 20, "images");
  auto labels =
      UploadBytes(*rig.ops, DType::kI32, {8}, DeviceRule(0), PatternBytes(32), 1 << 20, "labels");
  ASSERT_TRUE(images.ok() && labels.ok());
  auto placed = rig.ops->Place({(*images)->id, (*labels)->id}, ShardingRule(dp, {{"data"}, {}, {}}),
                               SourceHandling::kKeep, "");
  ASSERT_TRUE(placed.ok()) << placed.status();
  // Results beside their kept sources get derived names (derived_name.h), so
  // "images" still names one tensor.
  EXPECT_EQ((*placed)[0]->name, "images:place");
  EXPECT_EQ((*placed)[1]->name, "labels:place");
  EXPECT_EQ((*placed)[1]->sharding.spec(), (PartitionSpec{{{"data"}}}));
  EXPECT_EQ((*placed)[1]->mesh_id, dp);
  ExpectShardsMatch(*(*placed)[0], PatternBytes(128));
  EXPECT_EQ(rig.store->size(), 4);

  EXPECT_EQ(rig.ops->Place({}, DeviceRule(1), SourceHandling::kKeep, "").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      rig.ops->Place({(*images)->id, (*labels)->id}, DeviceRule(1), SourceHandling::kKeep, "x")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      rig.ops->Place({(*images)->id, (*images)->id}, DeviceRule(1), SourceHandling::kDonate, "")
          .status()
          .code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rig.ops->Place({"t-missing"}, DeviceRule(1), SourceHandling::kKeep, "").status().code(),
            absl::StatusCode::kNotFound);
  auto renamed = rig.ops->Place({(*labels)->id}, DeviceRule(3), SourceHandling::kKeep, "moved");
  ASSERT_TRUE(renamed.ok());
  EXPECT_EQ(renamed->front()->name, "moved");
  // A result that replaces its donated source takes over the source's name.
  auto donated = rig.ops->Place({(*images)->id}, DeviceRule(2), SourceHandling::kDonate, "");
  ASSERT_TRUE(donated.ok()) << donated.status();
  EXPECT_EQ(donated->front()->name, "images");
}

TEST(ResharderTest, PartialTensorsCannotBeMovedOrCreated) {
  TestRig rig;
  const std::string r2 = rig.CreateMesh({{"r", 2}});
  auto a = UploadBytes(*rig.ops, DType::kF32, {4}, DeviceRule(0), PatternBytes(16));
  auto b = UploadBytes(*rig.ops, DType::kF32, {4}, DeviceRule(1), PatternBytes(16));
  ASSERT_TRUE(a.ok() && b.ok());
  pb::Placement partial = ShardingRule(r2, {}, pb::SHARDING_MODE_EVEN, {"r"}).placement();
  auto assembled = rig.ops->Assemble({4}, testing::Core(partial), {(*a)->id, (*b)->id},
                                     SourceHandling::kKeep, "");
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  auto moved = rig.ops->Place({(*assembled)->id}, DeviceRule(2), SourceHandling::kKeep, "");
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kFailedPrecondition);
  auto to_partial = rig.ops->Place({(*a)->id}, ShardingRule(r2, {}, pb::SHARDING_MODE_EVEN, {"r"}),
                                   SourceHandling::kKeep, "");
  EXPECT_EQ(to_partial.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::server
