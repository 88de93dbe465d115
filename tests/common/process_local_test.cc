// Worked examples from JAX's docstrings (local_to_global_shape,
// get_process_index_and_count, num_addressable_indices,
// make_array_from_process_local_data), every error message, and loadax's
// global-shape rule. tests/common/process_local_conformance_test.cc checks
// the same functions against JAX on random cases.
#include "common/process_local.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "common/mesh.h"
#include "common/region.h"
#include "common/sharding.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using Spec = std::vector<std::vector<std::string>>;
using Owners = std::vector<int32_t>;  // process of device id 0, 1, ...

std::vector<int64_t> Iota(int64_t n) {
  std::vector<int64_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = i;
  return ids;
}

NamedSharding MakeSharding(std::vector<MeshAxis> axes, std::vector<int64_t> ids, Spec spec,
                           std::vector<std::string> partial = {},
                           ShardingMode mode = ShardingMode::kEven) {
  absl::StatusOr<Mesh> mesh = Mesh::Create(std::move(axes), std::move(ids));
  EXPECT_TRUE(mesh.ok()) << mesh.status();
  absl::StatusOr<NamedSharding> sharding =
      NamedSharding::Create(*mesh, PartitionSpec{std::move(spec)}, std::move(partial), mode);
  EXPECT_TRUE(sharding.ok()) << sharding.status();
  return *sharding;
}

// JAX's docstring mesh: {'a': 2, 'b': 2, 'c': 2} over `ids`.
NamedSharding Abc(Spec spec, std::vector<int64_t> ids = Iota(8)) {
  return MakeSharding({{"a", 2}, {"b", 2}, {"c", 2}}, std::move(ids), std::move(spec));
}

// 2 devices per host, 4 hosts: device d is on process d / 2.
const Owners kTwoPerHost = {0, 0, 1, 1, 2, 2, 3, 3};

absl::StatusOr<ProcessIndexCount> IndexCount(const NamedSharding& s, int dim, int rank,
                                             const Owners& owners, int32_t process) {
  return ProcessIndexAndCount(
      s, dim, rank, [&](int64_t id) { return owners[id]; }, process);
}

absl::StatusOr<PartialShape> ToGlobal(const NamedSharding& s, const Shape& local,
                                      const Owners& owners, int32_t process) {
  return LocalToGlobalShape(
      s, local, [&](int64_t id) { return owners[id]; }, process);
}

absl::StatusOr<int64_t> Addressable(const NamedSharding& s, int dim, const Shape& global,
                                    const Owners& owners, int32_t process) {
  return NumAddressableIndices(
      s, dim, global, [&](int64_t id) { return owners[id]; }, process);
}

absl::StatusOr<LocalDataLayout> Layout(const NamedSharding& s, std::optional<Shape> global,
                                       const Shape& local, const Owners& owners, int32_t process) {
  std::optional<absl::Span<const int64_t>> given;
  if (global.has_value()) given = absl::Span<const int64_t>(*global);
  return ProcessLocalLayout(
      s, given, local, [&](int64_t id) { return owners[id]; }, process);
}

void ExpectError(const absl::Status& status, absl::StatusCode code,
                 const std::vector<std::string>& parts) {
  EXPECT_EQ(status.code(), code) << status;
  for (const std::string& part : parts) {
    EXPECT_TRUE(absl::StrContains(status.message(), part))
        << "message '" << status.message() << "' lacks '" << part << "'";
  }
}

// ----- local_to_global_shape ------------------------------------------------

TEST(LocalToGlobalShapeTest, JaxDocstringExamplesTwoDevicesPerHost) {
  struct Example {
    Spec spec;
    PartialShape global;  // for local data [4, 6]
  };
  const std::vector<Example> examples = {
      {{}, {4, 6}},                      // P()
      {{{"a", "b", "c"}, {}}, {16, 6}},  // 4 * local_shape[0]
      {{{"a", "b"}, {}}, {16, 6}},       // 'c' stays inside each process
      {{{}, {"a", "c"}}, {4, 12}},       // 2 * local_shape[1]
      {{{"a", "c"}, {"b"}}, {8, 12}},    // 2 * both
  };
  for (const Example& example : examples) {
    const NamedSharding sharding = Abc(example.spec);
    for (int32_t process = 0; process < 4; ++process) {
      absl::StatusOr<PartialShape> global = ToGlobal(sharding, {4, 6}, kTwoPerHost, process);
      ASSERT_TRUE(global.ok()) << global.status();
      EXPECT_EQ(*global, example.global) << sharding.ToString() << " process " << process;
      absl::StatusOr<Shape> inferred = InferGlobalShape(
          sharding, Shape{4, 6}, [](int64_t id) { return id / 2; }, process);
      ASSERT_TRUE(inferred.ok()) << inferred.status();
      EXPECT_EQ(*inferred, (Shape{*example.global[0], *example.global[1]}));
    }
  }
}

TEST(LocalToGlobalShapeTest, RandomlyPermutedDevicesAreUnknown) {
  // "If devices in the Mesh are randomly permuted: ... P('a', ('b', 'c')):
  // global_shape = (None, None)". This permutation does that (checked with JAX).
  const NamedSharding permuted = Abc({{"a"}, {"b", "c"}}, {7, 3, 6, 4, 5, 0, 2, 1});
  for (int32_t process = 0; process < 4; ++process) {
    absl::StatusOr<PartialShape> global = ToGlobal(permuted, {4, 6}, kTwoPerHost, process);
    ASSERT_TRUE(global.ok()) << global.status();
    EXPECT_EQ(*global, (PartialShape{std::nullopt, std::nullopt}));
    absl::StatusOr<Shape> inferred = InferGlobalShape(
        permuted, Shape{4, 6}, [](int64_t id) { return id / 2; }, process);
    EXPECT_EQ(inferred.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(inferred.status().message(),
              "Unable to compute global_shape due to non-uniform sharding. Specify global shape "
              "directly. Partially computed global_shape=(None, None).");
  }
  // Another permutation keeps dimension 0 uniform (each process has one
  // device in each half of 'a').
  const NamedSharding half = Abc({{"a"}, {"b", "c"}}, {3, 6, 0, 5, 7, 1, 2, 4});
  absl::StatusOr<PartialShape> global = ToGlobal(half, {4, 6}, kTwoPerHost, 0);
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_EQ(*global, (PartialShape{4, std::nullopt}));
  absl::StatusOr<LocalDataLayout> layout = Layout(half, std::nullopt, {4, 6}, kTwoPerHost, 0);
  EXPECT_EQ(layout.status().message(),
            "Unable to compute global_shape due to non-uniform sharding. Specify global shape "
            "directly. Partially computed global_shape=(4, None).");
}

TEST(LocalToGlobalShapeTest, RankZeroAndOverflow) {
  absl::StatusOr<PartialShape> scalar = ToGlobal(Abc({}), {}, kTwoPerHost, 0);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_TRUE(scalar->empty());
  ExpectError(
      ToGlobal(Abc({{"a", "b", "c"}}), {std::numeric_limits<int64_t>::max() / 2}, kTwoPerHost, 0)
          .status(),
      absl::StatusCode::kInvalidArgument, {"overflows int64"});
  ExpectError(ToGlobal(Abc({}), {-1}, kTwoPerHost, 0).status(), absl::StatusCode::kInvalidArgument,
              {"local_shape[0] is -1"});
}

// ----- get_process_index_and_count --------------------------------------------

// Mesh(r=rows, c=cols) over devices 0..rows*cols-1 with P('r', 'c'); `owners`
// reads like JAX's docstring pictures, row by row.
NamedSharding Grid(int64_t rows, int64_t cols) {
  return MakeSharding({{"r", rows}, {"c", cols}}, Iota(rows * cols), {{"r"}, {"c"}});
}

void ExpectIndexCounts(const NamedSharding& s, int dim, const Owners& owners,
                       const std::vector<ProcessIndexCount>& want) {
  for (size_t p = 0; p < want.size(); ++p) {
    absl::StatusOr<ProcessIndexCount> got = IndexCount(s, dim, 2, owners, static_cast<int32_t>(p));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, want[p]) << "dim " << dim << " process " << p << ": got {" << got->index << ", "
                             << got->count << "}";
  }
}

TEST(ProcessIndexAndCountTest, JaxDocstringExamples) {
  // 1234
  // 2143   (processes numbered from 1 in the docstring)
  const Owners a = {0, 1, 2, 3, 1, 0, 3, 2};
  ExpectIndexCounts(Grid(2, 4), 0, a, {{0, 1}, {0, 1}, {0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 4), 1, a, {{0, 2}, {0, 2}, {1, 2}, {1, 2}});
  // 1212
  // 3434
  const Owners b = {0, 1, 0, 1, 2, 3, 2, 3};
  ExpectIndexCounts(Grid(2, 4), 0, b, {{0, 2}, {0, 2}, {1, 2}, {1, 2}});
  ExpectIndexCounts(Grid(2, 4), 1, b, {{0, 2}, {1, 2}, {0, 2}, {1, 2}});
  // Uniform: 1111 / 2222, 12 / 21, 1212 / 2121, 1212 / 1212.
  ExpectIndexCounts(Grid(2, 4), 0, {0, 0, 0, 0, 1, 1, 1, 1}, {{0, 2}, {1, 2}});
  ExpectIndexCounts(Grid(2, 4), 1, {0, 0, 0, 0, 1, 1, 1, 1}, {{0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 2), 0, {0, 1, 1, 0}, {{0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 2), 1, {0, 1, 1, 0}, {{0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 4), 1, {0, 1, 0, 1, 1, 0, 1, 0}, {{0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 4), 0, {0, 1, 0, 1, 0, 1, 0, 1}, {{0, 1}, {0, 1}});
  ExpectIndexCounts(Grid(2, 4), 1, {0, 1, 0, 1, 0, 1, 0, 1}, {{0, 2}, {1, 2}});
}

TEST(ProcessIndexAndCountTest, IndexFollowsSmallestStartNotJaxHashOrder) {
  // JAX answers (1, 2) for process 0 here (Python set order); we number the
  // slice sets by their smallest start, as JAX's docstring describes.
  const NamedSharding s = MakeSharding({{"x", 8}}, Iota(8), {{"x"}});
  const Owners halves = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(*IndexCount(s, 0, 1, halves, 0), (ProcessIndexCount{0, 2}));
  EXPECT_EQ(*IndexCount(s, 0, 1, halves, 1), (ProcessIndexCount{1, 2}));
  // Reversed ownership: process 1 now holds the first rows.
  const Owners reversed = {1, 1, 1, 1, 0, 0, 0, 0};
  EXPECT_EQ(*IndexCount(s, 0, 1, reversed, 1), (ProcessIndexCount{0, 2}));
}

TEST(ProcessIndexAndCountTest, NonUniformDimensions) {
  // 1122
  // 2121
  // 1121
  // 1222   uniform along rows, not along columns (3 vs 4 columns).
  const Owners owners = {0, 0, 1, 1, 1, 0, 1, 0, 0, 0, 1, 0, 0, 1, 1, 1};
  ExpectIndexCounts(Grid(4, 4), 0, owners, {{0, 1}, {0, 1}});
  absl::StatusOr<ProcessIndexCount> cols = IndexCount(Grid(4, 4), 1, 2, owners, 0);
  EXPECT_TRUE(IsNonUniformShardingError(cols.status())) << cols.status();
  EXPECT_EQ(cols.status().message(),
            "NamedSharding(Mesh(r=4, c=4), P('r', 'c')) is non-uniform on dim=1 as some "
            "processes have different number of slices.");

  // Same counts, overlapping sets: over Mesh(r=2, c=4), P(None, 'c') the
  // processes hold columns {0,1}, {1,2}, {2,3}, {3,0}.
  const NamedSharding cols_only = MakeSharding({{"r", 2}, {"c", 4}}, Iota(8), {{}, {"c"}});
  const Owners ring = {0, 0, 1, 2, 3, 1, 2, 3};
  absl::StatusOr<ProcessIndexCount> ring_cols = IndexCount(cols_only, 1, 2, ring, 2);
  EXPECT_TRUE(IsNonUniformShardingError(ring_cols.status())) << ring_cols.status();
  EXPECT_EQ(ring_cols.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ring_cols.status().message(),
            "NamedSharding(Mesh(r=2, c=4), P(None, 'c')) is non-uniform on dim=1");
  EXPECT_FALSE(IsNonUniformShardingError(absl::InvalidArgumentError("x")));
  EXPECT_FALSE(IsNonUniformShardingError(absl::OkStatus()));
}

TEST(ProcessIndexAndCountTest, FullyAddressableOrReplicatedIsZeroOfOne) {
  const NamedSharding s = MakeSharding({{"x", 8}}, Iota(8), {{"x"}});
  const Owners all_on_3 = Owners(8, 3);
  EXPECT_EQ(*IndexCount(s, 0, 1, all_on_3, 3), (ProcessIndexCount{0, 1}));
  // Replicated: (0, 1) even for a process that holds none of the devices.
  EXPECT_EQ(*IndexCount(Abc({}), 0, 2, kTwoPerHost, 9), (ProcessIndexCount{0, 1}));
}

TEST(ProcessIndexAndCountTest, Errors) {
  const NamedSharding s = MakeSharding({{"x", 4}}, {4, 5, 6, 7}, {{"x"}});
  ExpectError(IndexCount(s, 0, 1, kTwoPerHost, 0).status(), absl::StatusCode::kFailedPrecondition,
              {"process 0 holds no device of NamedSharding(Mesh(x=4), P('x'))", "[4, 5, 6, 7]"});
  ExpectError(IndexCount(s, 1, 1, kTwoPerHost, 2).status(), absl::StatusCode::kInvalidArgument,
              {"dimension 1 is outside a rank-1 array"});
  ExpectError(IndexCount(s, -1, 1, kTwoPerHost, 2).status(), absl::StatusCode::kInvalidArgument,
              {"dimension -1"});
  ExpectError(IndexCount(s, 0, 1, kTwoPerHost, -1).status(), absl::StatusCode::kInvalidArgument,
              {"process index -1 is negative"});
  ExpectError(ProcessIndexAndCount(
                  s, 0, 1, [](int64_t) { return -2; }, 0)
                  .status(),
              absl::StatusCode::kInvalidArgument, {"device 4 of", "is on process -2"});
  // A spec longer than the rank (JAX's process-local path does not check).
  ExpectError(IndexCount(Abc({{"a"}, {"b"}}), 0, 1, kTwoPerHost, 0).status(),
              absl::StatusCode::kInvalidArgument, {"only valid for values of rank at least 2"});
  const NamedSharding partial = MakeSharding({{"x", 2}, {"y", 4}}, Iota(8), {{"x"}}, {"y"});
  ExpectError(IndexCount(partial, 0, 1, kTwoPerHost, 0).status(),
              absl::StatusCode::kInvalidArgument, {"partial axes"});
}

// ----- num_addressable_indices ------------------------------------------------

TEST(NumAddressableIndicesTest, JaxDocstringExample) {
  // 1221
  // 1221
  // 0000
  const Owners owners = {1, 2, 2, 1, 1, 2, 2, 1, 0, 0, 0, 0};
  const NamedSharding s = Grid(3, 4);
  EXPECT_EQ(*Addressable(s, 0, {3, 4}, owners, 1), 2);
  EXPECT_EQ(*Addressable(s, 1, {3, 4}, owners, 1), 2);
  EXPECT_EQ(*Addressable(s, 0, {3, 4}, owners, 2), 2);
  EXPECT_EQ(*Addressable(s, 1, {3, 4}, owners, 2), 2);
  EXPECT_EQ(*Addressable(s, 0, {3, 4}, owners, 0), 1);
  EXPECT_EQ(*Addressable(s, 1, {3, 4}, owners, 0), 4);
  // Scaled shards count indices, not shards: global [6, 8] doubles each.
  EXPECT_EQ(*Addressable(s, 1, {6, 8}, owners, 0), 8);
  // No device on the process: 0, as JAX.
  EXPECT_EQ(*Addressable(s, 0, {3, 4}, owners, 5), 0);
}

TEST(NumAddressableIndicesTest, Errors) {
  const NamedSharding s = Grid(3, 4);
  const Owners owners = Owners(12, 0);
  ExpectError(Addressable(s, 1, {3, 6}, owners, 0).status(), absl::StatusCode::kInvalidArgument,
              {"is not divisible by 4"});
  ExpectError(Addressable(s, 2, {3, 4}, owners, 0).status(), absl::StatusCode::kInvalidArgument,
              {"dimension 2 is outside a rank-2 array"});
  // Padded shardings are read as even ones.
  const NamedSharding padded =
      MakeSharding({{"r", 3}, {"c", 4}}, Iota(12), {{"r"}, {"c"}}, {}, ShardingMode::kPadded);
  EXPECT_EQ(*Addressable(padded, 1, {3, 8}, owners, 0), 8);
  ExpectError(Addressable(padded, 1, {3, 6}, owners, 0).status(),
              absl::StatusCode::kInvalidArgument,
              {"process-local data needs even shards (JAX's rule): ", "is not divisible by 4"});
}

// ----- make_array_from_process_local_data -------------------------------------

ProcessLocalShard Shard(int64_t device, int64_t position, Box global, Box local) {
  return {device, position, std::move(global), std::move(local)};
}

TEST(ProcessLocalLayoutTest, FileCommentExample) {
  absl::StatusOr<LocalDataLayout> layout =
      Layout(Abc({{"a", "c"}, {"b"}}), std::nullopt, {4, 6}, kTwoPerHost, 1);
  ASSERT_TRUE(layout.ok()) << layout.status();
  EXPECT_EQ(layout->global_shape, (Shape{8, 12}));
  EXPECT_EQ(layout->local_shape, (Shape{4, 6}));
  EXPECT_EQ(layout->shards, (std::vector<ProcessLocalShard>{
                                Shard(2, 2, {{0, 2}, {6, 12}}, {{0, 2}, {0, 6}}),
                                Shard(3, 3, {{2, 4}, {6, 12}}, {{2, 4}, {0, 6}}),
                            }));
}

TEST(ProcessLocalLayoutTest, JaxDocstringBatchExample) {
  // P(('x', 'y')) over Mesh(x=2, y=4); rows_per_device 2, feature_length 32;
  // two processes of four devices each.
  const NamedSharding s = MakeSharding({{"x", 2}, {"y", 4}}, Iota(8), {{"x", "y"}});
  const Owners halves = {0, 0, 0, 0, 1, 1, 1, 1};
  for (const std::optional<Shape>& global :
       {std::optional<Shape>(), std::optional<Shape>({16, 32})}) {
    absl::StatusOr<LocalDataLayout> layout = Layout(s, global, {8, 32}, halves, 1);
    ASSERT_TRUE(layout.ok()) << layout.status();
    EXPECT_EQ(layout->global_shape, (Shape{16, 32}));
    ASSERT_EQ(layout->shards.size(), 4u);
    for (int i = 0; i < 4; ++i) {
      const ProcessLocalShard& shard = layout->shards[i];
      EXPECT_EQ(shard.device_id, 4 + i);
      EXPECT_EQ(shard.global_box, (Box{{8 + 2 * i, 10 + 2 * i}, {0, 32}}));
      EXPECT_EQ(shard.local_box, (Box{{2 * i, 2 * i + 2}, {0, 32}}));
    }
  }
}

TEST(ProcessLocalLayoutTest, JaxDocstringInterleavedExample) {
  //   0213
  //   0213
  //   4657
  //   4657   processes (0,1), (2,3), (4,5), (6,7); local data 2x2.
  const NamedSharding s =
      MakeSharding({{"r", 2}, {"c", 4}}, {0, 2, 1, 3, 4, 6, 5, 7}, {{"r"}, {"c"}});
  // No global shape: (4, 4), as JAX.
  absl::StatusOr<LocalDataLayout> inferred = Layout(s, std::nullopt, {2, 2}, kTwoPerHost, 0);
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_EQ(inferred->global_shape, (Shape{4, 4}));
  EXPECT_EQ(inferred->shards, (std::vector<ProcessLocalShard>{
                                  Shard(0, 0, {{0, 2}, {0, 1}}, {{0, 2}, {0, 1}}),
                                  Shard(1, 2, {{0, 2}, {2, 3}}, {{0, 2}, {1, 2}}),
                              }));
  absl::StatusOr<LocalDataLayout> last = Layout(s, Shape{4, 4}, {2, 2}, kTwoPerHost, 3);
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_EQ(last->shards, (std::vector<ProcessLocalShard>{
                              Shard(6, 5, {{2, 4}, {1, 2}}, {{0, 2}, {0, 1}}),
                              Shard(7, 7, {{2, 4}, {3, 4}}, {{0, 2}, {1, 2}}),
                          }));
  // Global (2, 4): the rows are the whole array on every process.
  absl::StatusOr<LocalDataLayout> rows = Layout(s, Shape{2, 4}, {2, 2}, kTwoPerHost, 0);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(rows->shards, (std::vector<ProcessLocalShard>{
                              Shard(0, 0, {{0, 1}, {0, 1}}, {{0, 1}, {0, 1}}),
                              Shard(1, 2, {{0, 1}, {2, 3}}, {{0, 1}, {1, 2}}),
                          }));
  // The docstring's 2x2 and 4x2 need 4 columns to divide by 'c' here (JAX
  // says so too).
  ExpectError(Layout(s, Shape{4, 2}, {2, 2}, kTwoPerHost, 0).status(),
              absl::StatusCode::kInvalidArgument, {"is not divisible by 4"});
}

TEST(ProcessLocalLayoutTest, NonUniformDimensionWithAGivenGlobalShape) {
  // Dimension 1 is non-uniform, so the global shape must be given. Process 0
  // (devices 0 and 1, mesh positions 2 and 5) holds columns [6, 9) and
  // [3, 6) of 12, and both row halves.
  const NamedSharding half = Abc({{"a"}, {"b", "c"}}, {3, 6, 0, 5, 7, 1, 2, 4});
  absl::StatusOr<LocalDataLayout> whole = Layout(half, Shape{8, 12}, {8, 12}, kTwoPerHost, 0);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_EQ(whole->shards, (std::vector<ProcessLocalShard>{
                               Shard(0, 2, {{0, 4}, {6, 9}}, {{0, 4}, {6, 9}}),
                               Shard(1, 5, {{4, 8}, {3, 6}}, {{4, 8}, {3, 6}}),
                           }));
  // JAX's code (not its docstring) also accepts just the process's 6 columns.
  absl::StatusOr<LocalDataLayout> own = Layout(half, Shape{8, 12}, {8, 6}, kTwoPerHost, 0);
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->shards, (std::vector<ProcessLocalShard>{
                             Shard(0, 2, {{0, 4}, {6, 9}}, {{0, 4}, {3, 6}}),
                             Shard(1, 5, {{4, 8}, {3, 6}}, {{4, 8}, {0, 3}}),
                         }));
  // Both row halves are on every process: 4 rows are neither 8 nor 8.
  EXPECT_EQ(Layout(half, Shape{8, 12}, {4, 6}, kTwoPerHost, 0).status().message(),
            "Invalid host data, each dimension should match either global or process shape. In "
            "dimension 0, the process data has 4 elements. Process addresses 8 elements and "
            "global_shape=(8, 12).");
}

TEST(ProcessLocalLayoutTest, ReplicatedDataIsTheWholeArray) {
  absl::StatusOr<LocalDataLayout> layout = Layout(Abc({}), std::nullopt, {4, 6}, kTwoPerHost, 2);
  ASSERT_TRUE(layout.ok()) << layout.status();
  ASSERT_EQ(layout->shards.size(), 2u);
  EXPECT_EQ(layout->shards[0], Shard(4, 4, {{0, 4}, {0, 6}}, {{0, 4}, {0, 6}}));
  EXPECT_EQ(layout->shards[1], Shard(5, 5, {{0, 4}, {0, 6}}, {{0, 4}, {0, 6}}));
  absl::StatusOr<LocalDataLayout> scalar = Layout(Abc({}), Shape{}, {}, kTwoPerHost, 0);
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->shards.size(), 2u);
  EXPECT_TRUE(scalar->shards[0].local_box.empty());
}

TEST(ProcessLocalLayoutTest, InvalidHostDataMessages) {
  const NamedSharding s = MakeSharding({{"x", 8}}, Iota(8), {{"x"}});
  const Owners halves = {0, 0, 0, 0, 1, 1, 1, 1};
  EXPECT_EQ(Layout(s, Shape{8}, {3}, halves, 0).status().message(),
            "Invalid host data, each dimension should match either global or process shape. In "
            "dimension 0, the process data has 3 elements. Process addresses 4 elements and "
            "global_shape=(8,).");
  EXPECT_EQ(Layout(Abc({{"a", "c"}, {"b"}}), Shape{8, 12}, {4, 5}, kTwoPerHost, 1).status(),
            absl::InvalidArgumentError(
                "Invalid host data, each dimension should match either global or process "
                "shape. In dimension 1, the process data has 5 elements. Process addresses 6 "
                "elements and global_shape=(8, 12)."));
}

TEST(ProcessLocalLayoutTest, OtherErrors) {
  const NamedSharding s = MakeSharding({{"x", 4}}, {4, 5, 6, 7}, {{"x"}});
  // No device of the sharding on process 0.
  ExpectError(Layout(s, Shape{8}, {8}, kTwoPerHost, 0).status(),
              absl::StatusCode::kFailedPrecondition,
              {"process 0 holds no device of", "no process-local data to place"});
  ExpectError(Layout(Abc({}), std::nullopt, {4}, kTwoPerHost, 7).status(),
              absl::StatusCode::kFailedPrecondition, {"process 7 holds no device"});
  ExpectError(Layout(s, Shape{8, 2}, {4}, kTwoPerHost, 2).status(),
              absl::StatusCode::kInvalidArgument,
              {"global_shape [8,2] has rank 2", "shape [4] has rank 1"});
  ExpectError(Layout(s, Shape{6}, {3}, kTwoPerHost, 2).status(), absl::StatusCode::kInvalidArgument,
              {"is not divisible by 4"});
  ExpectError(Layout(s, Shape{8}, {-4}, kTwoPerHost, 2).status(),
              absl::StatusCode::kInvalidArgument, {"local_shape[0] is -4"});
  ExpectError(Layout(s, std::nullopt, {}, kTwoPerHost, 2).status(),
              absl::StatusCode::kInvalidArgument, {"only valid for values of rank at least 1"});
  const NamedSharding partial = MakeSharding({{"x", 2}, {"y", 4}}, Iota(8), {{"x"}}, {"y"});
  ExpectError(Layout(partial, std::nullopt, {4}, kTwoPerHost, 0).status(),
              absl::StatusCode::kInvalidArgument, {"partial axes"});
}

// ----- loadax -----------------------------------------------------------------

TEST(LoadaxGlobalShapeTest, FullAndReplicated) {
  EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kFull, {10, 3}, 4, 2), (Shape{40, 3}));
  EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kFull, {0, 3}, 4, 2), (Shape{0, 3}));
  EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kReplicated, {10, 3}, 4, 8), (Shape{10, 3}));
  EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kReplicated, {}, 4, 8), Shape{});
}

TEST(LoadaxGlobalShapeTest, Errors) {
  EXPECT_EQ(LoadaxGlobalShape(ProcessDataPartition::kFull, {10, 3}, 2, 8).status(),
            absl::InvalidArgumentError("([10,3]) cannot be sharded across 8 devices."));
  ExpectError(LoadaxGlobalShape(ProcessDataPartition::kFull, {}, 2, 8).status(),
              absl::StatusCode::kInvalidArgument,
              {"([]) cannot be sharded across 8 devices", "use REPLICATED"});
  EXPECT_EQ(LoadaxGlobalShape(static_cast<ProcessDataPartition>(7), {8}, 2, 8).status(),
            absl::InvalidArgumentError("Unsupported partition: 7"));
  ExpectError(LoadaxGlobalShape(ProcessDataPartition::kFull, {8}, 0, 8).status(),
              absl::StatusCode::kInvalidArgument, {"num_processes (0)"});
  ExpectError(LoadaxGlobalShape(ProcessDataPartition::kReplicated, {8}, 2, 0).status(),
              absl::StatusCode::kInvalidArgument, {"local_device_count (0)"});
  ExpectError(LoadaxGlobalShape(ProcessDataPartition::kReplicated, {-8}, 2, 1).status(),
              absl::StatusCode::kInvalidArgument, {"local_shape[0] is -8"});
  ExpectError(LoadaxGlobalShape(ProcessDataPartition::kFull,
                                {std::numeric_limits<int64_t>::max() - 1}, 4, 1)
                  .status(),
              absl::StatusCode::kInvalidArgument, {"overflows int64"});
}

TEST(LoadaxGlobalShapeTest, AgreesWithJaxInferenceForContiguousHosts) {
  // loadax FULL is P(all mesh axes) on dimension 0; with hosts owning
  // contiguous devices JAX infers the same global shape.
  const NamedSharding full =
      MakeSharding({{"data", 2}, {"model", 4}}, Iota(8), {{"data", "model"}});
  for (int num_processes : {1, 2, 4, 8}) {
    const int per = 8 / num_processes;
    for (int32_t p = 0; p < num_processes; ++p) {
      absl::StatusOr<Shape> jax = InferGlobalShape(
          full, Shape{8, 3}, [&](int64_t id) { return static_cast<int32_t>(id / per); }, p);
      ASSERT_TRUE(jax.ok()) << jax.status();
      EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kFull, {8, 3}, num_processes, per), *jax);
    }
  }
  absl::StatusOr<Shape> replicated = InferGlobalShape(
      MakeSharding({{"data", 8}}, Iota(8), {}), Shape{8, 3}, [](int64_t id) { return id / 2; }, 1);
  EXPECT_EQ(*LoadaxGlobalShape(ProcessDataPartition::kReplicated, {8, 3}, 4, 2), *replicated);
}

}  // namespace
}  // namespace placement
