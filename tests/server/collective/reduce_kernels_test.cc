#include "server/collective/kernels/reduce_kernels.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "server/collective/kernels/half_float.h"
#include "server/service/from_proto.h"
#include "tests/server/collective/collective_test_util.h"

namespace placement::server {
namespace {

using testing::Decode;
using testing::Encode;
using testing::kAllOps;
using testing::kReducibleDTypes;
using testing::Near;
using testing::Reference;
using testing::TestValues;

TEST(HalfFloatTest, KnownF16Encodings) {
  EXPECT_EQ(FloatToF16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToF16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToF16(65504.0f), 0x7bff);                 // largest finite
  EXPECT_EQ(FloatToF16(65520.0f), 0x7c00);                 // rounds to infinity
  EXPECT_EQ(FloatToF16(5.9604644775390625e-8f), 0x0001);   // smallest subnormal
  EXPECT_EQ(FloatToF16(2.98023223876953125e-8f), 0x0000);  // half of it: ties to even
  EXPECT_EQ(FloatToF16(6.103515625e-5f), 0x0400);          // smallest normal
  EXPECT_EQ(FloatToF16(1.0f + 1.0f / 2048), 0x3c00);       // tie -> even mantissa
  EXPECT_EQ(FloatToF16(1.0f + 3.0f / 2048), 0x3c02);       // tie -> even (up)
  EXPECT_TRUE(std::isnan(F16ToFloat(FloatToF16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(F16ToFloat(0x3555), 0.333251953125f);
  EXPECT_EQ(F16ToFloat(0x0001), 5.9604644775390625e-8f);
  EXPECT_TRUE(std::isinf(F16ToFloat(0xfc00)));
}

TEST(HalfFloatTest, F16RoundTripsEveryFiniteValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;  // inf / NaN
    ASSERT_EQ(FloatToF16(F16ToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
}

TEST(HalfFloatTest, Bf16) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x4049), 3.140625f);
  EXPECT_EQ(FloatToBf16(1.0f + 1.0f / 256), 0x3f80);  // tie -> even
  EXPECT_EQ(FloatToBf16(1.0f + 3.0f / 256), 0x3f82);  // tie -> even (up)
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::numeric_limits<float>::quiet_NaN()))));
}

// Every op x dtype against the float64 reference, over more elements than one
// sub-block, with 3 and 8 inputs and two outputs.
TEST(ReduceKernelsTest, EveryOpAndDTypeMatchesReference) {
  constexpr int64_t kCount = 2500;
  for (int ranks : {1, 3, 8}) {
    for (DType dtype : kReducibleDTypes) {
      std::vector<std::vector<double>> values;
      std::vector<std::vector<std::byte>> inputs;
      for (int r = 0; r < ranks; ++r) {
        values.push_back(TestValues(dtype, kCount, 17 * r + 3));
        inputs.push_back(Encode(dtype, values.back()));
      }
      for (ReduceOp op : kAllOps) {
        const int64_t bytes = kCount * DTypeSize(dtype);
        std::vector<std::byte> out_a(bytes), out_b(bytes);
        std::vector<const std::byte*> in_ptrs;
        for (auto& in : inputs) in_ptrs.push_back(in.data());
        std::vector<std::byte*> out_ptrs = {out_a.data(), out_b.data()};
        ReduceInto(dtype, op, in_ptrs, out_ptrs, kCount);
        std::vector<double> got = Decode(dtype, out_a.data(), kCount);
        ASSERT_EQ(out_a, out_b);
        for (int64_t i = 0; i < kCount; ++i) {
          std::vector<double> column;
          for (int r = 0; r < ranks; ++r) column.push_back(values[r][i]);
          const double want = Reference(dtype, op, column);
          ASSERT_TRUE(Near(dtype, got[i], want))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " ranks=" << ranks << " i=" << i
              << ": got " << got[i] << ", want " << want;
        }
      }
    }
  }
}

// Two inputs into one output (Gloo's pairwise reduce; a one-pass path where
// the element type is its own accumulator): every op and dtype matches the
// reference with the output apart, equal to the first input, or to the
// second.
TEST(ReduceKernelsTest, PairwiseIntoOneOutputMatchesReferenceWhereverTheOutputIs) {
  constexpr int64_t kCount = 2500;
  for (DType dtype : kReducibleDTypes) {
    const std::vector<double> a = TestValues(dtype, kCount, 5);
    const std::vector<double> b = TestValues(dtype, kCount, 22);
    for (ReduceOp op : kAllOps) {
      for (int where : {0, 1, 2}) {  // apart, the first input, the second
        std::vector<std::byte> x = Encode(dtype, a), y = Encode(dtype, b);
        std::vector<std::byte> apart(x.size());
        std::byte* out = where == 0 ? apart.data() : where == 1 ? x.data() : y.data();
        const std::byte* in[2] = {x.data(), y.data()};
        std::byte* outs[1] = {out};
        ReduceInto(dtype, op, in, outs, kCount);
        const std::vector<double> got = Decode(dtype, out, kCount);
        for (int64_t i = 0; i < kCount; ++i) {
          const double want = Reference(dtype, op, {a[i], b[i]});
          ASSERT_TRUE(Near(dtype, got[i], want))
              << DTypeName(dtype) << " " << ReduceOpName(op) << " output " << where << " i=" << i
              << ": got " << got[i] << ", want " << want;
        }
      }
    }
  }
}

TEST(ReduceKernelsTest, InPlaceOutputMayBeAnInput) {
  std::vector<float> a(3000, 1.5f), b(3000, 2.0f);
  std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                      reinterpret_cast<const std::byte*>(b.data())};
  std::vector<std::byte*> out = {reinterpret_cast<std::byte*>(a.data()),
                                 reinterpret_cast<std::byte*>(b.data())};
  ReduceInto(DType::kF32, ReduceOp::kSum, in, out, 3000);
  for (int i = 0; i < 3000; ++i) {
    ASSERT_EQ(a[i], 3.5f);
    ASSERT_EQ(b[i], 3.5f);
  }
}

// Documented rule: integer MEAN is the exact sum divided with truncation
// toward zero; the sum does not wrap.
TEST(ReduceKernelsTest, IntegerMeanTruncatesTowardZeroWithoutOverflow) {
  {
    std::vector<int32_t> a = {-3, 3, 7, std::numeric_limits<int32_t>::max()};
    std::vector<int32_t> b = {-4, 4, 8, std::numeric_limits<int32_t>::max()};
    std::vector<int32_t> out(4);
    std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                        reinterpret_cast<const std::byte*>(b.data())};
    std::vector<std::byte*> outs = {reinterpret_cast<std::byte*>(out.data())};
    ReduceInto(DType::kI32, ReduceOp::kMean, in, outs, 4);
    EXPECT_EQ(out, (std::vector<int32_t>{-3, 3, 7, std::numeric_limits<int32_t>::max()}));
  }
  {
    std::vector<uint8_t> a = {200, 255, 1}, b = {255, 200, 2}, out(3);
    std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                        reinterpret_cast<const std::byte*>(b.data())};
    std::vector<std::byte*> outs = {reinterpret_cast<std::byte*>(out.data())};
    ReduceInto(DType::kU8, ReduceOp::kMean, in, outs, 3);
    EXPECT_EQ(out, (std::vector<uint8_t>{227, 227, 1}));
  }
  {
    const int64_t big = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> a = {big, -big}, b = {big, -big - 1}, out(2);
    std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                        reinterpret_cast<const std::byte*>(b.data())};
    std::vector<std::byte*> outs = {reinterpret_cast<std::byte*>(out.data())};
    ReduceInto(DType::kI64, ReduceOp::kMean, in, outs, 2);
    EXPECT_EQ(out, (std::vector<int64_t>{big, -big}));
  }
}

TEST(ReduceKernelsTest, IntegerSumWraps) {
  std::vector<int8_t> a = {100, -100}, b = {100, -100}, out(2);
  std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                      reinterpret_cast<const std::byte*>(b.data())};
  std::vector<std::byte*> outs = {reinterpret_cast<std::byte*>(out.data())};
  ReduceInto(DType::kI8, ReduceOp::kSum, in, outs, 2);
  EXPECT_EQ(out, (std::vector<int8_t>{-56, 56}));
}

TEST(ReduceKernelsTest, FloatMaxMinPropagateNaN) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> a = {nan, 1.0f}, b = {2.0f, nan}, out(2);
  std::vector<const std::byte*> in = {reinterpret_cast<const std::byte*>(a.data()),
                                      reinterpret_cast<const std::byte*>(b.data())};
  std::vector<std::byte*> outs = {reinterpret_cast<std::byte*>(out.data())};
  for (ReduceOp op : {ReduceOp::kMax, ReduceOp::kMin}) {
    ReduceInto(DType::kF32, op, in, outs, 2);
    EXPECT_TRUE(std::isnan(out[0])) << ReduceOpName(op);
    EXPECT_TRUE(std::isnan(out[1])) << ReduceOpName(op);
  }
}

TEST(ReduceKernelsTest, DivideInPlaceMatchesMeanRules) {
  std::vector<int32_t> ints = {-7, 7, 9};
  DivideInPlace(DType::kI32, reinterpret_cast<std::byte*>(ints.data()), 3, 2);
  EXPECT_EQ(ints, (std::vector<int32_t>{-3, 3, 4}));
  std::vector<uint16_t> halves = {FloatToBf16(3.0f)};
  DivideInPlace(DType::kBF16, reinterpret_cast<std::byte*>(halves.data()), 1, 2);
  EXPECT_EQ(Bf16ToFloat(halves[0]), 1.5f);
}

TEST(ReduceOpTest, ParsesSeedNamesAndRejectsOthers) {
  EXPECT_EQ(*ParseReduceOp("mean"), ReduceOp::kMean);
  EXPECT_EQ(*ParseReduceOp("SUM"), ReduceOp::kSum);
  absl::StatusOr<ReduceOp> bad = ParseReduceOp("avg");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "Unsupported reduce_type: avg. Use 'sum', 'mean', 'max', 'min' or 'prod'.");
  EXPECT_FALSE(RequestedReduceOp(0, "").value().has_value());
  EXPECT_EQ(RequestedReduceOp(2, "").value(), ReduceOp::kMean);
  EXPECT_EQ(RequestedReduceOp(0, "max").value(), ReduceOp::kMax);
  EXPECT_EQ(RequestedReduceOp(1, "mean").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RequestedReduceOp(9, "").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace placement::server
