#include "server/collective/collective_plan.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

Mesh Mesh24() { return *Mesh::Create({{"data", 2}, {"model", 4}}, {0, 1, 2, 3, 4, 5, 6, 7}); }
Mesh Mesh222() { return *Mesh::Create({{"x", 2}, {"y", 2}, {"z", 2}}, {0, 1, 2, 3, 4, 5, 6, 7}); }

TensorLayout Layout(Mesh mesh, PartitionSpec spec, std::vector<std::string> partial, Shape shape,
                    ShardingMode mode = ShardingMode::kEven) {
  return TensorLayout{
      DType::kF32, std::move(shape),
      *NamedSharding::Create(std::move(mesh), std::move(spec), std::move(partial), mode)};
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(PlanAllReduceTest, PartialAxesBecomeReplicated) {
  auto plan = PlanAllReduce(Layout(Mesh24(), {{{"model"}}}, {"data"}, {8, 3}), {"data"});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(plan->groups, ElementsAre(ElementsAre(0, 4), ElementsAre(1, 5), ElementsAre(2, 6),
                                        ElementsAre(3, 7)));
  EXPECT_EQ(plan->result_shape, (Shape{8, 3}));
  EXPECT_TRUE(plan->result_sharding.partial_axes().empty());
  EXPECT_EQ(plan->result_sharding.spec(), (PartitionSpec{{{"model"}}}));
}

TEST(PlanAllReduceTest, Dim0BlocksReduceToOneBlock) {
  auto plan = PlanAllReduce(Layout(Mesh24(), {{{"data", "model"}}}, {}, {16, 5}), {});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->result_shape, (Shape{2, 5}));
  EXPECT_TRUE(plan->result_sharding.IsFullyReplicated());
  ASSERT_EQ(plan->groups.size(), 1u);
  EXPECT_EQ(plan->groups[0].size(), 8u);
}

TEST(PlanAllReduceTest, ErrorsNameTheAxisAndTheRule) {
  // Unknown axis: INVALID_ARGUMENT naming the mesh's axes (the seed's
  // default "batch" on a "data" mesh).
  auto unknown = PlanAllReduce(Layout(Mesh24(), {}, {"data"}, {4}), {"batch"});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(unknown.status()), HasSubstr("axis 'batch' is not an axis"));
  EXPECT_THAT(Message(unknown.status()), HasSubstr("('data', 'model')"));
  // Repeated axis.
  EXPECT_EQ(PlanAllReduce(Layout(Mesh24(), {}, {"data"}, {4}), {"data", "data"}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Replicated axis: nothing to reduce.
  auto replicated = PlanAllReduce(Layout(Mesh24(), {}, {"data"}, {4}), {"data", "model"});
  EXPECT_EQ(replicated.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(replicated.status()), HasSubstr("replicated over 'model'"));
  // Axis sharding dimension 1.
  auto dim1 = PlanAllReduce(Layout(Mesh24(), {{{}, {"model"}}}, {}, {4, 8}), {"model"});
  EXPECT_EQ(dim1.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(dim1.status()), HasSubstr("'model' shards dimension 1"));
  // Only part of dimension 0's axes.
  auto part = PlanAllReduce(Layout(Mesh24(), {{{"data", "model"}}}, {}, {16}), {"model"});
  EXPECT_EQ(part.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(part.status()), HasSubstr("name all of them"));
  // Uneven padded blocks.
  auto padded =
      PlanAllReduce(Layout(Mesh24(), {{{"model"}}}, {}, {10}, ShardingMode::kPadded), {"model"});
  EXPECT_EQ(padded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(padded.status()), HasSubstr("(10) is not divisible by its 4 shards"));
}

TEST(PlanAllGatherTest, GathersMinorMostAxes) {
  auto plan = PlanAllGather(Layout(Mesh222(), {{{}, {"x", "y"}}}, {}, {3, 8}), {"y"}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->result_sharding.spec(), (PartitionSpec{{{}, {"x"}}}));
  EXPECT_FALSE(plan->contiguous);  // dimension 0 has extent 3 in each shard
  auto all = PlanAllGather(Layout(Mesh222(), {{{"x", "y"}}}, {}, {8, 2}), {}, -2);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(all->dim, 0);
  EXPECT_EQ(all->axes, (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(all->contiguous);
  EXPECT_TRUE(all->result_sharding.IsFullyReplicated());
  // Order-insensitive: the spec's order defines the ranks.
  auto swapped = PlanAllGather(Layout(Mesh222(), {{{"x", "y"}}}, {}, {8}), {"y", "x"}, 0);
  ASSERT_TRUE(swapped.ok());
  EXPECT_EQ(swapped->axes, (std::vector<std::string>{"x", "y"}));
}

TEST(PlanAllGatherTest, Errors) {
  auto major = PlanAllGather(Layout(Mesh222(), {{{"x", "y"}}}, {}, {8}), {"x"}, 0);
  EXPECT_EQ(major.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(major.status()), HasSubstr("minor-most"));
  EXPECT_EQ(PlanAllGather(Layout(Mesh222(), {{{"x"}}}, {}, {8}), {"z"}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto range = PlanAllGather(Layout(Mesh222(), {{{"x"}}}, {}, {8}), {}, 1);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(range.status()), HasSubstr("dim 1 is out of range for f32[8] (rank 1)"));
  EXPECT_EQ(PlanAllGather(Layout(Mesh222(), {}, {}, {8}), {}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlanReduceScatterTest, PartialToShard) {
  auto plan = PlanReduceScatter(Layout(Mesh24(), {{{"data"}}}, {"model"}, {8, 12}), {}, 1);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->result_sharding.spec(), (PartitionSpec{{{"data"}, {"model"}}}));
  EXPECT_TRUE(plan->result_sharding.partial_axes().empty());
  EXPECT_FALSE(plan->contiguous);
  auto appended = PlanReduceScatter(Layout(Mesh24(), {{{"data"}}}, {"model"}, {8}), {"model"}, 0);
  ASSERT_TRUE(appended.ok()) << appended.status();
  EXPECT_EQ(appended->result_sharding.spec(), (PartitionSpec{{{"data", "model"}}}));
  EXPECT_TRUE(appended->contiguous);
}

TEST(PlanReduceScatterTest, Errors) {
  auto indivisible = PlanReduceScatter(Layout(Mesh24(), {}, {"model"}, {6, 2}), {}, 0);
  EXPECT_EQ(indivisible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(indivisible.status()),
              HasSubstr("holds 6 elements per shard, not divisible by the 4 devices"));
  EXPECT_EQ(PlanReduceScatter(Layout(Mesh24(), {}, {"model"}, {8}), {"data"}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(PlanReduceScatter(Layout(Mesh24(), {}, {}, {8}), {}, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(PlanBroadcastTest, RootRankAndLayouts) {
  auto plan = PlanBroadcast(Layout(Mesh24(), {}, {"model"}, {4}), {"model"}, /*root=*/6);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->root_rank, 2);
  EXPECT_TRUE(plan->result_sharding.IsFullyReplicated());
  auto replicated = PlanBroadcast(Layout(Mesh24(), {{{"model"}}}, {}, {8}), {"data"}, 1);
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ(replicated->root_rank, 0);
  auto sharded = PlanBroadcast(Layout(Mesh24(), {{{}, {"model"}}}, {}, {2, 8}), {"model"}, 0);
  EXPECT_EQ(sharded.status().code(), absl::StatusCode::kFailedPrecondition);
}

// Every plan carries its result's shard domains (AllocateOver uses them
// without working them out again): they are the result sharding's.
TEST(CollectivePlanTest, ResultDomainsAreTheResultShardingsDomains) {
  std::vector<absl::StatusOr<CollectivePlan>> plans = {
      PlanAllReduce(Layout(Mesh24(), {{{"model"}}}, {"data"}, {8, 3}), {"data"}),
      PlanAllReduce(Layout(Mesh24(), {{{"data", "model"}}}, {}, {16, 5}), {}),
      PlanAllGather(Layout(Mesh222(), {{{}, {"x", "y"}}}, {}, {3, 8}), {"y"}, 1),
      PlanReduceScatter(Layout(Mesh24(), {{{"data"}}}, {"model"}, {8, 12}), {}, 1),
      PlanBroadcast(Layout(Mesh24(), {}, {"model"}, {4}), {"model"}, /*root=*/6)};
  for (const absl::StatusOr<CollectivePlan>& plan : plans) {
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto domains = plan->result_sharding.IndexDomains(plan->result_shape);
    ASSERT_TRUE(domains.ok()) << domains.status();
    EXPECT_EQ(plan->result_domains, *domains) << CollectiveKindName(plan->kind);
    EXPECT_EQ(plan->result_domains.size(), 8u);
  }
}

}  // namespace
}  // namespace placement::server
