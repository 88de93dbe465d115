#include "server/tensor/download_plan.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DownloadWhole;
using testing::ExtractBox;
using testing::PatternBytes;
using testing::ReadPlan;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;
namespace pb = placement::v1;

DownloadSelection Device(int64_t id) {
  DownloadSelection s;
  s.kind = DownloadSelectionKind::kDevice;
  s.device_id = id;
  return s;
}

DownloadSelection Devices(std::vector<int64_t> ids) {
  DownloadSelection s;
  s.kind = DownloadSelectionKind::kDeviceSet;
  s.device_ids = std::move(ids);
  return s;
}

DownloadSelection Process(int32_t index) {
  DownloadSelection s;
  s.kind = DownloadSelectionKind::kProcess;
  s.process_index = index;
  return s;
}

class DownloadPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    xy_ = rig_.CreateMesh({{"x", 2}, {"y", 4}});
    data_ = PatternBytes(8 * 12 * 4, 3);
  }
  std::shared_ptr<const Tensor> Upload(const pb::PlacementRule& rule) {
    auto tensor = UploadBytes(*rig_.ops, DType::kF32, shape_, rule, data_, 100);
    EXPECT_TRUE(tensor.ok()) << tensor.status();
    return *tensor;
  }
  std::unique_ptr<DownloadPlan> Open(const std::string& id, const DownloadSelection& s) {
    auto plan = rig_.ops->OpenDownload(id, s);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? std::move(*plan) : nullptr;
  }

  TestRig rig_;
  std::string xy_;
  Shape shape_ = {8, 12};
  std::string data_;
};

TEST_F(DownloadPlanTest, WholeArrayInEveryChunkSize) {
  auto tensor = Upload(ShardingRule(xy_, {{"y"}, {"x"}}));
  for (int64_t chunk : {1, 3, 4, 7, 48, 100, 384, 1 << 20}) {
    auto back = DownloadWhole(*rig_.ops, tensor->id, chunk);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, data_) << "chunk " << chunk;
  }
}

TEST_F(DownloadPlanTest, OneDeviceShardIsRawEvenForReplicas) {
  auto tensor = Upload(ShardingRule(xy_, {{}, {"x"}}));  // y replicates
  auto plan = Open(tensor->id, Device(6));               // coords (1, 2): columns 6..12, replica 2
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->shape(), (Shape{8, 6}));
  ASSERT_EQ(plan->pieces().size(), 1u);
  EXPECT_EQ(plan->pieces()[0].replica_id, 2);
  EXPECT_EQ(*ReadPlan(*plan, 5), ExtractBox(data_, shape_, {{0, 8}, {6, 12}}, 4));
}

TEST_F(DownloadPlanTest, DeviceSetGivesDistinctShardsInIndexOrder) {
  auto tensor = Upload(ShardingRule(xy_, {{"y"}}));  // rows split 4 ways, x replicates
  // Devices 7 (rows 6..8), 2 (rows 4..6), 6 (rows 4..6 again, a replica).
  auto plan = Open(tensor->id, Devices({7, 2, 6}));
  ASSERT_NE(plan, nullptr);
  ASSERT_EQ(plan->pieces().size(), 2u);
  EXPECT_EQ(plan->pieces()[0].box, (Box{{4, 6}, {0, 12}}));
  EXPECT_EQ(plan->pieces()[1].box, (Box{{6, 8}, {0, 12}}));
  EXPECT_EQ(plan->shape(), (Shape{4, 12}));  // rows concatenated
  EXPECT_EQ(plan->total_bytes(), 4 * 12 * 4);
  EXPECT_EQ(*ReadPlan(*plan, 7), ExtractBox(data_, shape_, {{4, 8}, {0, 12}}, 4));
}

TEST_F(DownloadPlanTest, ColumnPiecesThatDoNotConcatenateAreFlat) {
  auto tensor = Upload(ShardingRule(xy_, {{}, {"y"}}));
  auto plan = Open(tensor->id, Devices({1, 0}));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->shape(), (Shape{8 * 3 * 2}));
  EXPECT_EQ(*ReadPlan(*plan), ExtractBox(data_, shape_, {{0, 8}, {0, 3}}, 4) +
                                  ExtractBox(data_, shape_, {{0, 8}, {3, 6}}, 4));
}

TEST_F(DownloadPlanTest, ProcessSelectionIsTheWholeArrayOnOneNode) {
  auto tensor = Upload(ShardingRule(xy_, {{"x", "y"}}));
  auto plan = Open(tensor->id, Process(0));
  ASSERT_NE(plan, nullptr);
  EXPECT_EQ(plan->shape(), shape_);
  EXPECT_EQ(*ReadPlan(*plan, 11), data_);
  auto other = rig_.ops->OpenDownload(tensor->id, Process(1));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(other.status().message().find("process 1"), std::string::npos);
}

TEST_F(DownloadPlanTest, Errors) {
  const std::string r2 = rig_.CreateMesh({{"r", 2}});
  auto tensor = Upload(ReplicatedRule(r2));
  auto not_in_mesh = rig_.ops->OpenDownload(tensor->id, Device(5));
  EXPECT_EQ(not_in_mesh.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(not_in_mesh.status().message().find("[0, 1]"), std::string::npos)
      << not_in_mesh.status();
  EXPECT_EQ(rig_.ops->OpenDownload(tensor->id, Devices({})).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(rig_.ops->OpenDownload("t-nope", DownloadSelection{}).status().code(),
            absl::StatusCode::kNotFound);
  auto plan = Open(tensor->id, DownloadSelection{});
  std::string buffer(8, '\0');
  EXPECT_EQ(plan->Read(plan->total_bytes() - 4, 8, buffer.data()).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(plan->Read(-1, 1, buffer.data()).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(DownloadPlanTest, PlanKeepsADeletedTensorAliveUntilItEnds) {
  auto tensor = Upload(ShardingRule(xy_, {{"x"}}));
  const std::string id = tensor->id;
  tensor.reset();
  auto plan = Open(id, DownloadSelection{});
  ASSERT_TRUE(rig_.store->Delete({id}).ok());
  EXPECT_EQ(rig_.store->Get(id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_GT(rig_.MemoryInUse(), 0);
  EXPECT_EQ(*ReadPlan(*plan, 64), data_);
  plan.reset();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(DownloadPlanTest, PaddedShardingRoundTrips) {
  const Shape shape = {7, 5};
  const std::string data = PatternBytes(7 * 5 * 2, 9);
  auto tensor = UploadBytes(*rig_.ops, DType::kF16, shape,
                            ShardingRule(xy_, {{"x"}, {"y"}}, pb::SHARDING_MODE_PADDED), data, 3);
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ(*DownloadWhole(*rig_.ops, (*tensor)->id, 9), data);
  // Device 3 holds columns [6, 5) clamped: an empty shard.
  auto plan = Open((*tensor)->id, Device(3));
  EXPECT_EQ(plan->total_bytes(), 0);
}

}  // namespace
}  // namespace placement::server
