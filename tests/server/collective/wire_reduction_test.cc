// The wire dtypes of cross-process reductions: widening, combining and the
// single final rounding, without Gloo in the way.
#include <cstddef>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/collective/collective_test_util.h"

#if PLACEMENT_WITH_GLOO
#include "server/collective/cluster/wire_reduction.h"
#endif

namespace placement::server {
namespace {

#if PLACEMENT_WITH_GLOO

using testing::Decode;
using testing::Encode;

TEST(WireReductionTest, WireDTypes) {
  EXPECT_EQ(WireDType(DType::kBF16, ReduceOp::kMax), DType::kF32);
  EXPECT_EQ(WireDType(DType::kF16, ReduceOp::kSum), DType::kF32);
  EXPECT_EQ(WireDType(DType::kI8, ReduceOp::kMean), DType::kI64);
  EXPECT_EQ(WireDType(DType::kU8, ReduceOp::kMean), DType::kI64);
  EXPECT_EQ(WireDType(DType::kI32, ReduceOp::kSum), DType::kI32);
  EXPECT_EQ(WireDType(DType::kF32, ReduceOp::kMean), DType::kF32);
  EXPECT_EQ(WireCombineOp(ReduceOp::kMean), ReduceOp::kSum);
  EXPECT_EQ(WireCombineOp(ReduceOp::kProd), ReduceOp::kProd);
}

// Reduces `per_input` with `op` into the wire dtype, "adds" `remote` (the
// other processes' partial result, already in the wire dtype) as Gloo
// would, finishes over `ranks`, and decodes.
std::vector<double> Roundtrip(DType dtype, ReduceOp op, const std::vector<std::vector<double>>& in,
                              const std::vector<double>& remote, int64_t ranks) {
  const int64_t count = static_cast<int64_t>(in[0].size());
  std::vector<std::vector<std::byte>> bytes;
  std::vector<const std::byte*> inputs;
  for (const auto& v : in) bytes.push_back(Encode(dtype, v));
  for (const auto& b : bytes) inputs.push_back(b.data());
  const DType wire = WireDType(dtype, op);
  std::vector<std::byte> acc(count * DTypeSize(wire));
  ReduceToWire(dtype, op, inputs, acc.data(), count);
  if (!remote.empty()) {
    std::vector<std::byte> other = Encode(wire, remote);
    std::vector<const std::byte*> both = {acc.data(), other.data()};
    std::vector<std::byte> sum(acc.size());
    ReduceToWire(wire, WireCombineOp(op), both, sum.data(), count);
    acc = sum;
  }
  FinishFromWire(dtype, op, ranks, acc.data(), acc.data(), count);
  return Decode(dtype, acc.data(), count);
}

TEST(WireReductionTest, HalfFloatsRoundOnceAtTheEnd) {
  // bf16: 256 + 1 + 1 (local, kept in f32 as 258) + 1 (remote) = 259 -> 260.
  EXPECT_EQ(Roundtrip(DType::kBF16, ReduceOp::kSum, {{256, 256}, {1, 1}, {1, 1}}, {1, 1}, 4),
            (std::vector<double>{260, 260}));
  // f16 MEAN: 2051 / 4 = 512.75 in f32, a tie between f16's 512.5 and 513:
  // 513. In f16, 2048 + 1 would already have rounded back to 2048.
  EXPECT_EQ(Roundtrip(DType::kF16, ReduceOp::kMean, {{2048}, {1}, {1}}, {1}, 4),
            (std::vector<double>{513}));
  EXPECT_EQ(Roundtrip(DType::kBF16, ReduceOp::kMax, {{-3, 5}, {7, 1}}, {2, 9}, 3),
            (std::vector<double>{7, 9}));
}

TEST(WireReductionTest, IntegerMeansSumInI64AndTruncateTowardZero) {
  EXPECT_EQ(Roundtrip(DType::kI8, ReduceOp::kMean, {{100, -100}, {100, -100}}, {101, -101}, 3),
            (std::vector<double>{100, -100}));
  EXPECT_EQ(Roundtrip(DType::kU8, ReduceOp::kMean, {{200}, {255}}, {}, 2),
            (std::vector<double>{227}));
  EXPECT_EQ(Roundtrip(DType::kI32, ReduceOp::kMean, {{-3}, {-4}}, {}, 2),
            (std::vector<double>{-3}));
  // SUM wraps in the dtype, as on every engine.
  EXPECT_EQ(Roundtrip(DType::kI8, ReduceOp::kSum, {{100}, {100}}, {}, 2),
            (std::vector<double>{-56}));
}

#else

TEST(WireReductionTest, NotBuilt) {
  GTEST_SKIP() << "built without Gloo (PLACEMENT_WITH_GLOO=OFF)";
}

#endif  // PLACEMENT_WITH_GLOO

}  // namespace
}  // namespace placement::server
