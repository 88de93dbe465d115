#include "server/tensor/placement_rules.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
namespace pb = placement::v1;

PartitionSpec P(std::vector<std::vector<std::string>> dims) {
  return PartitionSpec{std::move(dims)};
}

class PlacementRulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    xy_ = rig_.CreateMesh({{"x", 2}, {"y", 4}}, {}, "xy");
    data_ = rig_.CreateMesh({{"data", 8}}, {}, "dp");
    hybrid_ = rig_.CreateMesh({{"model", 2}, {"data", 4}}, {}, "hybrid");
  }
  const PlacementResolver& resolver() { return rig_.ops->resolver(); }
  ResolvedSharding MustResolve(const pb::PlacementRule& rule, const Shape& shape,
                               RuleScope scope = RuleScope::kSingleTensor) {
    auto r = resolver().Resolve(testing::Core(rule), shape, scope);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : ResolvedSharding{};
  }
  absl::Status Error(const pb::PlacementRule& rule, const Shape& shape,
                     RuleScope scope = RuleScope::kSingleTensor) {
    // Malformed enums are refused where the wire form is converted.
    absl::StatusOr<PlacementRule> core = PlacementRuleFromProto(rule);
    if (!core.ok()) return core.status();
    return resolver().Resolve(*core, shape, scope).status();
  }

  TestRig rig_;
  std::string xy_, data_, hybrid_;
};

TEST_F(PlacementRulesTest, DefaultAndSingleDevice) {
  ResolvedSharding d = MustResolve(pb::PlacementRule(), {3});
  EXPECT_EQ(d.sharding, NamedSharding::SingleDevice(0));
  EXPECT_EQ(d.mesh_id, "");
  pb::PlacementRule empty_placement;
  empty_placement.mutable_placement();
  EXPECT_EQ(MustResolve(empty_placement, {}).sharding, NamedSharding::SingleDevice(0));
  EXPECT_EQ(MustResolve(DeviceRule(5), {2, 2}).sharding, NamedSharding::SingleDevice(5));
  absl::Status unknown = Error(DeviceRule(99), {2});
  EXPECT_EQ(unknown.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("99"), std::string::npos);
}

TEST_F(PlacementRulesTest, ExplicitSharding) {
  ResolvedSharding r = MustResolve(ShardingRule(xy_, {{"x"}, {"y"}}), {4, 8});
  EXPECT_EQ(r.mesh_id, "xy");
  EXPECT_EQ(r.sharding.spec(), P({{"x"}, {"y"}}));
  EXPECT_EQ(Error(ShardingRule("nope", {{"x"}}), {4}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Error(ShardingRule("", {{"x"}}), {4}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status unknown_axis = Error(ShardingRule(xy_, {{"z"}}), {4});
  EXPECT_EQ(unknown_axis.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown_axis.message().find("'z'"), std::string::npos);
  EXPECT_EQ(Error(ShardingRule(xy_, {{"x"}, {"x"}}), {4, 4}).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status indivisible = Error(ShardingRule(xy_, {{}, {"y"}}), {4, 6});
  EXPECT_EQ(indivisible.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(indivisible.message().find("6 is not divisible by 4"), std::string::npos)
      << indivisible;
  EXPECT_TRUE(
      resolver().Resolve(ShardingRule(xy_, {{}, {"y"}}, pb::SHARDING_MODE_PADDED), {4, 6}).ok());
  absl::Status too_long = Error(ShardingRule(xy_, {{"x"}, {}}), {4});
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("rank"), std::string::npos);
  auto bad_mode = ShardingRule(xy_, {{"x"}});
  bad_mode.mutable_placement()->mutable_sharding()->set_mode(static_cast<pb::ShardingMode>(7));
  EXPECT_EQ(Error(bad_mode, {4}).code(), absl::StatusCode::kInvalidArgument);
  // Partial axes default to SUM.
  ResolvedSharding partial =
      MustResolve(ShardingRule(xy_, {{"x"}}, pb::SHARDING_MODE_EVEN, {"y"}), {4});
  EXPECT_EQ(partial.partial_op, ReduceOp::kSum);
  EXPECT_EQ(partial.sharding.partial_axes(), std::vector<std::string>{"y"});
}

TEST_F(PlacementRulesTest, GroupMembersDropUnshardedTrailingEntries) {
  auto rule = ShardingRule(data_, {{"data"}, {}, {}, {}});
  EXPECT_EQ(MustResolve(rule, {8, 28, 28, 3}, RuleScope::kGroupMember).sharding.spec(),
            P({{"data"}, {}, {}, {}}));
  EXPECT_EQ(MustResolve(rule, {8}, RuleScope::kGroupMember).sharding.spec(), P({{"data"}}));
  EXPECT_EQ(Error(rule, {8}).code(),
            absl::StatusCode::kInvalidArgument);  // single tensor: JAX rule
  absl::Status sharded_beyond =
      Error(ShardingRule(xy_, {{"x"}, {"y"}}), {8}, RuleScope::kGroupMember);
  EXPECT_EQ(sharded_beyond.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(sharded_beyond.message().find("dimension 1 4 ways"), std::string::npos)
      << sharded_beyond;
}

TEST_F(PlacementRulesTest, ReplicatedMesh) {
  ResolvedSharding r = MustResolve(ReplicatedRule(xy_), {3, 5});
  EXPECT_TRUE(r.sharding.IsFullyReplicated());
  EXPECT_EQ(r.sharding.mesh().num_devices(), 8);
  EXPECT_EQ(r.mesh_id, "xy");
  EXPECT_EQ(Error(ReplicatedRule("nope"), {1}).code(), absl::StatusCode::kNotFound);
}

pb::PlacementRule ShardBatchDim(const std::string& mesh, std::optional<int64_t> batch_axis,
                                const std::string& mesh_axis = "") {
  pb::PlacementRule rule;
  auto* r = rule.mutable_shard_batch_dim();
  r->set_mesh_id(mesh);
  if (batch_axis) r->set_batch_axis(*batch_axis);
  r->set_mesh_axis(mesh_axis);
  return rule;
}

TEST_F(PlacementRulesTest, ShardBatchDim) {
  EXPECT_EQ(MustResolve(ShardBatchDim(data_, std::nullopt), {16, 3}).sharding.spec(),
            P({{"data"}}));
  EXPECT_EQ(MustResolve(ShardBatchDim(data_, 1), {3, 16}).sharding.spec(), P({{}, {"data"}}));
  EXPECT_EQ(MustResolve(ShardBatchDim(data_, -1), {3, 16}).sharding.spec(), P({{}, {"data"}}));
  EXPECT_EQ(MustResolve(ShardBatchDim(xy_, 0, "y"), {4}).sharding.spec(), P({{"y"}}));
  // Rank 0 and batch_axis >= rank replicate, no error.
  EXPECT_TRUE(MustResolve(ShardBatchDim(data_, 0), {}).sharding.IsFullyReplicated());
  EXPECT_TRUE(MustResolve(ShardBatchDim(data_, 2), {16, 3}).sharding.IsFullyReplicated());
  EXPECT_EQ(Error(ShardBatchDim(data_, -3), {16, 3}).code(), absl::StatusCode::kInvalidArgument);
  absl::Status indivisible = Error(ShardBatchDim(data_, 0), {10, 3});
  EXPECT_EQ(indivisible.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(indivisible.message().find("10 is not divisible by 8"), std::string::npos)
      << indivisible;
  absl::Status no_axis = Error(ShardBatchDim(xy_, 0), {8});  // default "data" is not in xy
  EXPECT_EQ(no_axis.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_axis.message().find("'data'"), std::string::npos);
  EXPECT_EQ(Error(ShardBatchDim("", 0), {8}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(ShardBatchDim("nope", 0), {8}).code(), absl::StatusCode::kNotFound);
}

pb::PlacementRule Replicate(const std::string& mesh, std::vector<int64_t> devices) {
  pb::PlacementRule rule;
  rule.mutable_replicate()->set_mesh_id(mesh);
  for (int64_t d : devices) rule.mutable_replicate()->add_device_ids(d);
  return rule;
}

TEST_F(PlacementRulesTest, Replicate) {
  ResolvedSharding all = MustResolve(Replicate("", {}), {3});
  EXPECT_EQ(all.mesh_id, "");
  EXPECT_EQ(all.sharding.mesh().axes(), (std::vector<MeshAxis>{{"replica", 8}}));
  EXPECT_TRUE(all.sharding.IsFullyReplicated());
  ResolvedSharding some = MustResolve(Replicate("", {5, 2}), {});  // scalars are fine
  EXPECT_EQ(some.sharding.mesh().device_ids(), (std::vector<int64_t>{5, 2}));
  EXPECT_EQ(MustResolve(Replicate(hybrid_, {}), {3}).mesh_id, "hybrid");
  EXPECT_EQ(Error(Replicate("", {1, 42}), {3}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Error(Replicate("", {1, 1}), {3}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(Replicate(hybrid_, {1}), {3}).code(), absl::StatusCode::kInvalidArgument);
}

pb::PlacementRule ModelState(const std::string& mesh, const std::string& mode) {
  pb::PlacementRule rule;
  rule.mutable_model_state()->set_mesh_id(mesh);
  rule.mutable_model_state()->set_param_sharding(mode);
  return rule;
}

TEST_F(PlacementRulesTest, ModelState) {
  EXPECT_EQ(MustResolve(ModelState(hybrid_, ""), {4, 4}).sharding.spec(), P({}));
  EXPECT_EQ(MustResolve(ModelState(hybrid_, "replicate"), {4, 4}).sharding.spec(), P({}));
  // "shard": dimension 0 over the FIRST mesh axis ('model', not 'data').
  EXPECT_EQ(MustResolve(ModelState(hybrid_, "shard"), {4, 4}).sharding.spec(), P({{"model"}}));
  absl::Status typo = Error(ModelState(hybrid_, "shrad"), {4, 4});
  EXPECT_EQ(typo.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(typo.message(), "Unsupported param_sharding: 'shrad'. Use 'replicate' or 'shard'.");
  EXPECT_EQ(Error(ModelState(hybrid_, "shard"), {3, 4}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Error(ModelState(hybrid_, "shard"), {}, RuleScope::kGroupMember).code(),
            absl::StatusCode::kInvalidArgument);
}

pb::PlacementRule DataPartition(const std::string& mesh, int partition) {
  pb::PlacementRule rule;
  rule.mutable_data_partition()->set_mesh_id(mesh);
  rule.mutable_data_partition()->set_partition(static_cast<pb::DataPartition>(partition));
  return rule;
}

TEST_F(PlacementRulesTest, DataPartition) {
  // FULL (and unspecified): dimension 0 over all mesh axes, in mesh order.
  ResolvedSharding full = MustResolve(DataPartition(hybrid_, pb::DATA_PARTITION_FULL), {16, 3});
  EXPECT_EQ(full.sharding.spec(), P({{"model", "data"}}));
  EXPECT_EQ(MustResolve(DataPartition(hybrid_, 0), {8}).sharding.spec(), P({{"model", "data"}}));
  absl::Status indivisible = Error(DataPartition(hybrid_, pb::DATA_PARTITION_FULL), {10, 3});
  EXPECT_EQ(indivisible.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(indivisible.message(), "([10,3]) cannot be sharded across 8 devices.");
  EXPECT_EQ(Error(DataPartition(hybrid_, pb::DATA_PARTITION_FULL), {}).message(),
            "([]) cannot be sharded across 8 devices.");
  EXPECT_TRUE(MustResolve(DataPartition(hybrid_, pb::DATA_PARTITION_REPLICATED), {10, 3})
                  .sharding.IsFullyReplicated());
  absl::Status unsupported = Error(DataPartition(hybrid_, 7), {8});
  EXPECT_EQ(unsupported.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(unsupported.message(), "Unsupported partition: 7");
}

TEST(TrimSpecToRankTest, KeepsShorterSpecsAndDropsSizeOneAxes) {
  auto mesh = Mesh::Create({{"a", 1}, {"b", 2}}, {0, 1});
  ASSERT_TRUE(mesh.ok());
  auto sharding = NamedSharding::Create(*mesh, PartitionSpec{{{"b"}, {"a"}}});
  ASSERT_TRUE(sharding.ok());
  EXPECT_EQ(TrimSpecToRank(*sharding, 3)->spec(), sharding->spec());
  EXPECT_EQ(TrimSpecToRank(*sharding, 1)->spec(), (PartitionSpec{{{"b"}}}));  // 'a' has size 1
  EXPECT_EQ(TrimSpecToRank(*sharding, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::server
