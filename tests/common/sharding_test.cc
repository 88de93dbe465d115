#include "common/sharding.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/region.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using Spec = std::vector<std::vector<std::string>>;

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

Mesh MakeMesh(std::vector<MeshAxis> axes, std::vector<int64_t> ids = {}) {
  int64_t n = 1;
  for (const MeshAxis& axis : axes) n *= axis.size;
  if (ids.empty()) ids = Iota(n);
  absl::StatusOr<Mesh> mesh = Mesh::Create(std::move(axes), std::move(ids));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  return *mesh;
}

Mesh Mesh2x4() { return MakeMesh({{"x", 2}, {"y", 4}}); }

NamedSharding MustCreate(Mesh mesh, Spec dims, std::vector<std::string> partial = {},
                         ShardingMode mode = ShardingMode::kEven) {
  absl::StatusOr<NamedSharding> s = NamedSharding::Create(
      std::move(mesh), PartitionSpec{std::move(dims)}, std::move(partial), mode);
  EXPECT_TRUE(s.ok()) << s.status();
  return *s;
}

std::vector<ShardDomain> MustDomains(const NamedSharding& sharding, const Shape& shape) {
  absl::StatusOr<std::vector<ShardDomain>> domains = sharding.IndexDomains(shape);
  EXPECT_TRUE(domains.ok()) << domains.status();
  return domains.ok() ? *domains : std::vector<ShardDomain>{};
}

void ExpectInvalid(const absl::Status& status, const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(status.message(), part))
        << "message '" << status.message() << "' lacks '" << part << "'";
  }
}

// Compact expectation: device id, box, replica id, partial index.
struct Want {
  int64_t device;
  Box box;
  int64_t replica = 0;
  int64_t partial = 0;
};

void ExpectDomains(const std::vector<ShardDomain>& got, const std::vector<Want>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(got[i].mesh_position, static_cast<int64_t>(i));
    EXPECT_EQ(got[i].device_id, want[i].device);
    EXPECT_EQ(got[i].box, want[i].box)
        << BoxToString(got[i].box) << " vs " << BoxToString(want[i].box);
    EXPECT_EQ(got[i].shard_shape, BoxShape(want[i].box));
    EXPECT_EQ(got[i].replica_id, want[i].replica);
    EXPECT_EQ(got[i].partial_index, want[i].partial);
  }
}

TEST(PartitionSpecTest, ToString) {
  EXPECT_EQ(PartitionSpec{}.ToString(), "P()");
  EXPECT_EQ(PartitionSpec{{{"data"}}}.ToString(), "P('data')");
  EXPECT_EQ((PartitionSpec{{{"data"}, {}, {"x", "y"}}}.ToString()), "P('data', None, ('x', 'y'))");
  EXPECT_EQ((PartitionSpec{{{}, {}}}.ToString()), "P(None, None)");
  EXPECT_TRUE((PartitionSpec{{{"a"}}} == PartitionSpec{{{"a"}}}));
  EXPECT_FALSE((PartitionSpec{{{"a"}}} == PartitionSpec{{{"a"}, {}}}));
  EXPECT_FALSE((PartitionSpec{{{"a", "b"}}} == PartitionSpec{{{"b", "a"}}}));
}

TEST(ShardingModeTest, Names) {
  EXPECT_EQ(ShardingModeName(ShardingMode::kEven), "even");
  EXPECT_EQ(ShardingModeName(ShardingMode::kPadded), "padded");
}

TEST(NamedShardingTest, Accessors) {
  NamedSharding s = MustCreate(Mesh2x4(), {{"x"}}, {"y"}, ShardingMode::kPadded);
  EXPECT_EQ(s.mesh(), Mesh2x4());
  EXPECT_EQ(s.spec(), (PartitionSpec{{{"x"}}}));
  EXPECT_EQ(s.partial_axes(), (std::vector<std::string>{"y"}));
  EXPECT_EQ(s.mode(), ShardingMode::kPadded);
  EXPECT_EQ(s.NumPartials(), 4);
}

TEST(NamedShardingTest, CreateUnknownAxis) {
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{"z"}}}).status(),
                {"'z'", "P('z')", "not found in mesh", "Mesh(x=2, y=4)", "('x', 'y')"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{}, {"x", "w"}}}).status(),
                {"'w'", "not found in mesh"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {}, {"q"}).status(),
                {"'q'", "partial_axes", "not found in mesh", "('x', 'y')"});
  ExpectInvalid(NamedSharding::Create(Mesh::SingleDevice(0), {{{"x"}}}).status(),
                {"'x'", "Mesh()"});
}

TEST(NamedShardingTest, CreateAxisUsedTwice) {
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{"x"}, {"x"}}}).status(),
                {"P('x', 'x')", "duplicate entries for 'x'"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{"x", "x"}}}).status(),
                {"duplicate entries for 'x'"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{"y", "x"}, {}, {"y"}}}).status(),
                {"duplicate entries for 'y'"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{"x"}}}, {"y", "y"}).status(),
                {"partial_axes ('y', 'y')", "duplicate entries for 'y'"});
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {{{}, {"x"}}}, {"x"}).status(),
                {"'x'", "used twice", "P(None, 'x')", "partial_axes"});
}

TEST(NamedShardingTest, CreateBadMode) {
  ExpectInvalid(NamedSharding::Create(Mesh2x4(), {}, {}, static_cast<ShardingMode>(7)).status(),
                {"mode 7"});
}

TEST(NamedShardingTest, ValidateForRank) {
  NamedSharding s = MustCreate(Mesh2x4(), {{"x"}, {}, {"y"}});
  ExpectInvalid(
      s.ValidateFor({4, 4}),
      {"NamedSharding(Mesh(x=2, y=4), P('x', None, 'y'))",
       "is only valid for values of rank at least 3, but was applied to a value of rank 2"});
  ExpectInvalid(s.IndexDomains({4, 4}).status(), {"rank at least 3"});
  // Trailing None entries count, as in JAX.
  ExpectInvalid(MustCreate(Mesh2x4(), {{}}).ValidateFor({}), {"rank at least 1", "rank 0"});
  EXPECT_TRUE(s.ValidateFor({2, 3, 4}).ok());
  EXPECT_TRUE(s.ValidateFor({2, 3, 4, 5}).ok());
}

TEST(NamedShardingTest, ValidateForIndivisible) {
  NamedSharding s = MustCreate(Mesh2x4(), {{"x"}, {"y"}});
  absl::Status status = s.ValidateFor({8, 6});
  ExpectInvalid(status, {"dimension 1", "[8,6]", "size 6", "divisible by 4", "('y')",
                         "SHARDING_MODE_PADDED"});
  ExpectInvalid(MustCreate(Mesh2x4(), {{"y", "x"}}).ValidateFor({12}),
                {"dimension 0", "[12]", "size 12", "divisible by 8", "('y', 'x')"});
  ExpectInvalid(s.ValidateFor({3, 4}), {"dimension 0", "divisible by 2"});
  EXPECT_TRUE(s.ValidateFor({8, 8}).ok());
  EXPECT_TRUE(s.ValidateFor({0, 0}).ok());  // 0 is divisible by everything
  EXPECT_TRUE(
      MustCreate(Mesh2x4(), {{"x"}, {"y"}}, {}, ShardingMode::kPadded).ValidateFor({8, 6}).ok());
}

TEST(NamedShardingTest, ValidateForNegativeDimension) {
  ExpectInvalid(NamedSharding::Replicated(Mesh2x4()).ValidateFor({4, -1}), {"shape[1] is -1"});
}

// The worked examples of sharding.h.
TEST(NamedShardingTest, WorkedExamplePaddedTwoAxes) {
  NamedSharding s = MustCreate(Mesh2x4(), {{"x"}, {"y"}}, {}, ShardingMode::kPadded);
  ExpectDomains(MustDomains(s, {8, 6}), {
                                            {0, {{0, 4}, {0, 2}}},
                                            {1, {{0, 4}, {2, 4}}},
                                            {2, {{0, 4}, {4, 6}}},
                                            {3, {{0, 4}, {6, 6}}},
                                            {4, {{4, 8}, {0, 2}}},
                                            {5, {{4, 8}, {2, 4}}},
                                            {6, {{4, 8}, {4, 6}}},
                                            {7, {{4, 8}, {6, 6}}},
                                        });
}

TEST(NamedShardingTest, WorkedExampleTupleMostSignificantFirst) {
  ExpectDomains(MustDomains(MustCreate(Mesh2x4(), {{"y", "x"}}), {8, 6}), {{0, {{0, 1}, {0, 6}}},
                                                                           {1, {{2, 3}, {0, 6}}},
                                                                           {2, {{4, 5}, {0, 6}}},
                                                                           {3, {{6, 7}, {0, 6}}},
                                                                           {4, {{1, 2}, {0, 6}}},
                                                                           {5, {{3, 4}, {0, 6}}},
                                                                           {6, {{5, 6}, {0, 6}}},
                                                                           {7, {{7, 8}, {0, 6}}}});
  // The other order: k = 4x + y is plain row-major.
  std::vector<ShardDomain> xy = MustDomains(MustCreate(Mesh2x4(), {{"x", "y"}}), {8, 6});
  for (int64_t p = 0; p < 8; ++p) EXPECT_EQ(xy[p].box[0], (IndexRange{p, p + 1}));
}

TEST(NamedShardingTest, WorkedExampleUnnamedAxisReplicates) {
  ExpectDomains(MustDomains(MustCreate(Mesh2x4(), {{}, {"x"}}), {8, 6}),
                {{0, {{0, 8}, {0, 3}}, 0},
                 {1, {{0, 8}, {0, 3}}, 1},
                 {2, {{0, 8}, {0, 3}}, 2},
                 {3, {{0, 8}, {0, 3}}, 3},
                 {4, {{0, 8}, {3, 6}}, 0},
                 {5, {{0, 8}, {3, 6}}, 1},
                 {6, {{0, 8}, {3, 6}}, 2},
                 {7, {{0, 8}, {3, 6}}, 3}});
}

TEST(NamedShardingTest, WorkedExamplePartialAxes) {
  ExpectDomains(MustDomains(MustCreate(Mesh2x4(), {{"x"}}, {"y"}), {8, 6}),
                {{0, {{0, 4}, {0, 6}}, 0, 0},
                 {1, {{0, 4}, {0, 6}}, 0, 1},
                 {2, {{0, 4}, {0, 6}}, 0, 2},
                 {3, {{0, 4}, {0, 6}}, 0, 3},
                 {4, {{4, 8}, {0, 6}}, 0, 0},
                 {5, {{4, 8}, {0, 6}}, 0, 1},
                 {6, {{4, 8}, {0, 6}}, 0, 2},
                 {7, {{4, 8}, {0, 6}}, 0, 3}});
}

TEST(NamedShardingTest, PartialAxesInListedOrderWithReplication) {
  Mesh mesh = MakeMesh({{"a", 2}, {"b", 2}, {"c", 2}});
  // partial over (c, a): partial_index = 2c + a; b replicates.
  std::vector<ShardDomain> d = MustDomains(MustCreate(mesh, {}, {"c", "a"}), {3});
  const int64_t want_partial[8] = {0, 2, 0, 2, 1, 3, 1, 3};
  const int64_t want_replica[8] = {0, 0, 1, 1, 0, 0, 1, 1};
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(d[p].partial_index, want_partial[p]) << p;
    EXPECT_EQ(d[p].replica_id, want_replica[p]) << p;
    EXPECT_EQ(d[p].box, (Box{{0, 3}}));
  }
}

TEST(NamedShardingTest, CustomDeviceOrderFollowsMeshPositions) {
  // Same mesh as a JAX Mesh(np.array(devs)[[3,1,0,2,4,5,7,6]].reshape(2,4), ('x','y')).
  Mesh mesh = MakeMesh({{"x", 2}, {"y", 4}}, {3, 1, 0, 2, 4, 5, 7, 6});
  ExpectDomains(MustDomains(MustCreate(mesh, {{"y", "x"}}), {8, 3}), {{3, {{0, 1}, {0, 3}}},
                                                                      {1, {{2, 3}, {0, 3}}},
                                                                      {0, {{4, 5}, {0, 3}}},
                                                                      {2, {{6, 7}, {0, 3}}},
                                                                      {4, {{1, 2}, {0, 3}}},
                                                                      {5, {{3, 4}, {0, 3}}},
                                                                      {7, {{5, 6}, {0, 3}}},
                                                                      {6, {{7, 8}, {0, 3}}}});
  std::vector<ShardDomain> d = MustDomains(MustCreate(mesh, {{"x"}}), {8});
  const int64_t want_replica[8] = {0, 1, 2, 3, 0, 1, 2, 3};
  for (int p = 0; p < 8; ++p) EXPECT_EQ(d[p].replica_id, want_replica[p]);
}

TEST(NamedShardingTest, Scalars) {
  std::vector<ShardDomain> d = MustDomains(NamedSharding::Replicated(Mesh2x4()), {});
  ASSERT_EQ(d.size(), 8u);
  for (int p = 0; p < 8; ++p) {
    EXPECT_TRUE(d[p].box.empty());
    EXPECT_TRUE(d[p].shard_shape.empty());
    EXPECT_EQ(d[p].replica_id, p);
    EXPECT_EQ(d[p].partial_index, 0);
  }
  // Partial scalars: one summand per y coordinate, x replicates.
  std::vector<ShardDomain> partial = MustDomains(MustCreate(Mesh2x4(), {}, {"y"}), {});
  EXPECT_EQ(partial[5].partial_index, 1);
  EXPECT_EQ(partial[5].replica_id, 1);
  EXPECT_EQ(partial[2].replica_id, 0);
  // P('x') needs rank >= 1.
  ExpectInvalid(MustCreate(Mesh2x4(), {{"x"}}).IndexDomains({}).status(), {"rank at least 1"});
}

TEST(NamedShardingTest, SingleDevice) {
  NamedSharding s = NamedSharding::SingleDevice(6);
  EXPECT_EQ(s.mesh(), Mesh::SingleDevice(6));
  EXPECT_TRUE(s.IsFullyReplicated());
  EXPECT_EQ(s.ToString(), "NamedSharding(Mesh(), P())");
  ExpectDomains(MustDomains(s, {3, 4}), {{6, {{0, 3}, {0, 4}}}});
  ExpectDomains(MustDomains(s, {}), {{6, {}}});
}

TEST(NamedShardingTest, PaddedShortAndEmptyShards) {
  Mesh mesh = MakeMesh({{"d", 4}});
  NamedSharding s = MustCreate(mesh, {{"d"}}, {}, ShardingMode::kPadded);
  // ceil(5/4) = 2: [0,2) [2,4) [4,5) [5,5).
  ExpectDomains(
      MustDomains(s, {5, 2}),
      {{0, {{0, 2}, {0, 2}}}, {1, {{2, 4}, {0, 2}}}, {2, {{4, 5}, {0, 2}}}, {3, {{5, 5}, {0, 2}}}});
  // ceil(1/4) = 1: three empty shards, which count as replicas of each other.
  ExpectDomains(MustDomains(s, {1}),
                {{0, {{0, 1}}, 0}, {1, {{1, 1}}, 0}, {2, {{1, 1}}, 1}, {3, {{1, 1}}, 2}});
  // Divisible shapes are identical in both modes.
  EXPECT_EQ(MustDomains(s, {8, 3}), MustDomains(MustCreate(mesh, {{"d"}}), {8, 3}));
  // Zero-size dimension.
  ExpectDomains(MustDomains(s, {0}),
                {{0, {{0, 0}}, 0}, {1, {{0, 0}}, 1}, {2, {{0, 0}}, 2}, {3, {{0, 0}}, 3}});
}

TEST(NamedShardingTest, ZeroSizeDimensionEvenMode) {
  // JAX: every device holds slice(0, 0); replica ids count them all.
  std::vector<ShardDomain> d = MustDomains(MustCreate(Mesh2x4(), {{"x", "y"}, {}}), {0, 3});
  for (int p = 0; p < 8; ++p) {
    EXPECT_EQ(d[p].box, (Box{{0, 0}, {0, 3}}));
    EXPECT_EQ(d[p].replica_id, p);
  }
}

TEST(NamedShardingTest, NumShardsAlong) {
  NamedSharding s = MustCreate(MakeMesh({{"a", 2}, {"b", 3}, {"c", 4}}), {{"c", "a"}, {}, {"b"}});
  EXPECT_EQ(s.NumShardsAlong(0), 8);
  EXPECT_EQ(s.NumShardsAlong(1), 1);
  EXPECT_EQ(s.NumShardsAlong(2), 3);
  EXPECT_EQ(s.NumShardsAlong(3), 1);
  EXPECT_EQ(s.NumShardsAlong(-1), 1);
  EXPECT_EQ(s.NumPartials(), 1);
}

TEST(NamedShardingTest, IsFullyReplicated) {
  EXPECT_TRUE(NamedSharding::Replicated(Mesh2x4()).IsFullyReplicated());
  EXPECT_TRUE(MustCreate(Mesh2x4(), {{}, {}}).IsFullyReplicated());
  EXPECT_FALSE(MustCreate(Mesh2x4(), {{"x"}}).IsFullyReplicated());
  EXPECT_FALSE(MustCreate(Mesh2x4(), {}, {"y"}).IsFullyReplicated());
  Mesh ones = MakeMesh({{"a", 1}, {"b", 4}});
  EXPECT_TRUE(MustCreate(ones, {{"a"}}).IsFullyReplicated());  // size-1 axes split nothing
  EXPECT_TRUE(MustCreate(ones, {}, {"a"}).IsFullyReplicated());
  EXPECT_FALSE(MustCreate(ones, {{"a", "b"}}).IsFullyReplicated());
}

TEST(NamedShardingTest, ToStringAndEquality) {
  EXPECT_EQ(MustCreate(MakeMesh({{"data", 8}}), {{"data"}}).ToString(),
            "NamedSharding(Mesh(data=8), P('data'))");
  EXPECT_EQ(MustCreate(Mesh2x4(), {{"x"}, {}}, {"y"}, ShardingMode::kPadded).ToString(),
            "NamedSharding(Mesh(x=2, y=4), P('x', None), partial=('y'), mode=padded)");
  NamedSharding a = MustCreate(Mesh2x4(), {{"x"}});
  EXPECT_EQ(a, MustCreate(Mesh2x4(), {{"x"}}));
  EXPECT_FALSE(a == MustCreate(Mesh2x4(), {{"y"}}));
  EXPECT_FALSE(a == MustCreate(Mesh2x4(), {{"x"}}, {"y"}));
  EXPECT_FALSE(a == MustCreate(Mesh2x4(), {{"x"}}, {}, ShardingMode::kPadded));
  EXPECT_FALSE(a == MustCreate(MakeMesh({{"x", 2}, {"y", 4}}, {1, 0, 2, 3, 4, 5, 6, 7}), {{"x"}}));
  EXPECT_EQ(NamedSharding::Replicated(Mesh2x4()), MustCreate(Mesh2x4(), {}));
}

// Invariants on random shardings: for every partial index, the shards with
// replica_id 0 tile the array exactly; every element is held by the same
// number of devices; boxes follow the mixed-radix rule.
TEST(NamedShardingTest, RandomShardingsTileTheArray) {
  std::mt19937 rng(1234);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const std::vector<std::vector<MeshAxis>> meshes = {{{"a", 2}, {"b", 3}, {"c", 2}},
                                                     {{"a", 4}, {"b", 1}, {"c", 2}},
                                                     {{"a", 6}},
                                                     {{"a", 1}, {"b", 5}, {"c", 1}}};
  for (int iter = 0; iter < 200; ++iter) {
    Mesh mesh = MakeMesh(meshes[iter % meshes.size()]);
    std::vector<std::string> names = mesh.AxisNames();
    std::shuffle(names.begin(), names.end(), rng);
    const int rank = uniform(0, 3);
    Spec dims(uniform(0, rank));
    std::vector<std::string> partial;
    for (const std::string& name : names) {
      const int where = uniform(-2, static_cast<int>(dims.size()) - 1);
      if (where >= 0) dims[where].push_back(name);
      if (where == -2) partial.push_back(name);
    }
    const ShardingMode mode = uniform(0, 1) ? ShardingMode::kPadded : ShardingMode::kEven;
    NamedSharding s = MustCreate(mesh, dims, partial, mode);
    Shape shape(rank);
    for (int d = 0; d < rank; ++d) {
      shape[d] =
          mode == ShardingMode::kPadded ? uniform(0, 9) : s.NumShardsAlong(d) * uniform(0, 3);
    }
    SCOPED_TRACE(s.ToString() + " shape " + ShapeToString(shape));
    std::vector<ShardDomain> domains = MustDomains(s, shape);
    ASSERT_EQ(static_cast<int64_t>(domains.size()), mesh.num_devices());
    const int64_t n = NumElements(shape);
    std::vector<std::vector<int>> primary(s.NumPartials(), std::vector<int>(n, 0));
    std::vector<int> holders(n, 0);
    for (const ShardDomain& d : domains) {
      ASSERT_TRUE(BoxContains(FullBox(shape), d.box));
      for (int64_t e = 0; e < n; ++e) {
        int64_t rest = e;
        bool inside = true;
        for (int k = rank - 1; k >= 0; --k) {
          const int64_t c = rest % shape[k];
          rest /= shape[k];
          inside = inside && c >= d.box[k].begin && c < d.box[k].end;
        }
        if (!inside) continue;
        ++holders[e];
        if (d.replica_id == 0) ++primary[d.partial_index][e];
      }
    }
    for (const std::vector<int>& counts : primary) {
      for (int c : counts) ASSERT_EQ(c, 1);
    }
    if (mode == ShardingMode::kEven) {
      int64_t split = 1;
      for (int d = 0; d < rank; ++d) split *= s.NumShardsAlong(d);
      for (int h : holders) ASSERT_EQ(h, mesh.num_devices() / split);
    }
  }
}

}  // namespace
}  // namespace placement
