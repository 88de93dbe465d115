#include "server/collective/plan_cache.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement::server {
namespace {

using ::testing::HasSubstr;

TensorLayout Layout(PartitionSpec spec, std::vector<std::string> partial, Shape shape,
                    std::vector<int64_t> devices = {0, 1, 2, 3, 4, 5, 6, 7}) {
  Mesh mesh = *Mesh::Create({{"data", 2}, {"model", 4}}, std::move(devices));
  return TensorLayout{DType::kF32, std::move(shape),
                      *NamedSharding::Create(std::move(mesh), std::move(spec), std::move(partial))};
}

TEST(PlanCacheTest, TheSameCallOnTheSameLayoutPlansOnce) {
  PlanCache cache;
  const PlanQuery all_reduce{CollectiveKind::kAllReduce, {"data"}};
  auto first = cache.Plan(all_reduce, Layout({{{"model"}}}, {"data"}, {8, 3}));
  ASSERT_TRUE(first.ok()) << first.status();
  auto again = cache.Plan(all_reduce, Layout({{{"model"}}}, {"data"}, {8, 3}));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(first->get(), again->get());
  // What the plan would be without the cache.
  auto direct = PlanAllReduce(Layout({{{"model"}}}, {"data"}, {8, 3}), {"data"});
  ASSERT_TRUE(direct.ok());
  EXPECT_EQ((*first)->groups, direct->groups);
  EXPECT_EQ((*first)->result_shape, direct->result_shape);
  EXPECT_EQ((*first)->result_sharding, direct->result_sharding);
}

TEST(PlanCacheTest, AnythingThatDecidesThePlanMakesAnotherOne) {
  PlanCache cache;
  const TensorLayout layout = Layout({{{"model"}}}, {"data"}, {8, 4});
  auto base = cache.Plan({CollectiveKind::kAllReduce, {"data"}}, layout);
  ASSERT_TRUE(base.ok()) << base.status();
  // Another shape, other devices, another collective, dim or root.
  auto shape =
      cache.Plan({CollectiveKind::kAllReduce, {"data"}}, Layout({{{"model"}}}, {"data"}, {16, 4}));
  auto devices = cache.Plan({CollectiveKind::kAllReduce, {"data"}},
                            Layout({{{"model"}}}, {"data"}, {8, 4}, {7, 6, 5, 4, 3, 2, 1, 0}));
  auto scatter0 = cache.Plan({CollectiveKind::kReduceScatter, {"data"}, 0}, layout);
  auto scatter1 = cache.Plan({CollectiveKind::kReduceScatter, {"data"}, 1}, layout);
  auto root0 = cache.Plan({CollectiveKind::kBroadcast, {"data"}, 0, 0}, layout);
  auto root4 = cache.Plan({CollectiveKind::kBroadcast, {"data"}, 0, 4}, layout);
  for (const auto* plan : {&shape, &devices, &scatter0, &scatter1, &root0, &root4}) {
    ASSERT_TRUE(plan->ok()) << plan->status();
    EXPECT_NE(plan->value().get(), base->get());
  }
  EXPECT_EQ((*shape)->result_shape, (Shape{16, 4}));
  EXPECT_EQ((*devices)->result_sharding.mesh().device_ids().front(), 7);
  EXPECT_EQ((*scatter0)->dim, 0);
  EXPECT_EQ((*scatter1)->dim, 1);
  EXPECT_EQ((*root0)->root_rank, 0);
  EXPECT_EQ((*root4)->root_rank, 1);
}

TEST(PlanCacheTest, AFailedPlanFailsEveryTime) {
  PlanCache cache;
  // A replicated tensor has nothing to all-reduce.
  for (int i = 0; i < 2; ++i) {
    auto plan = cache.Plan({CollectiveKind::kAllReduce, {"data"}}, Layout({}, {}, {8}));
    EXPECT_EQ(plan.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(plan.status().message(), HasSubstr("all_reduce needs partial axes"));
  }
}

TEST(PlanCacheTest, ItStartsOverWhenFull) {
  PlanCache cache;
  const PlanQuery query{CollectiveKind::kAllReduce, {"data"}};
  auto first = cache.Plan(query, Layout({}, {"data"}, {1}));
  ASSERT_TRUE(first.ok());
  for (int64_t n = 2; n <= static_cast<int64_t>(PlanCache::kMaxEntries); ++n) {
    ASSERT_TRUE(cache.Plan(query, Layout({}, {"data"}, {n})).ok());
  }
  // Full: the next new plan starts over, so the first is made anew (the one
  // the caller holds stays valid).
  ASSERT_TRUE(cache.Plan(query, Layout({}, {"data"}, {0})).ok());
  auto again = cache.Plan(query, Layout({}, {"data"}, {1}));
  ASSERT_TRUE(again.ok());
  EXPECT_NE(again->get(), first->get());
  EXPECT_EQ((*first)->result_shape, (Shape{1}));
}

}  // namespace
}  // namespace placement::server
