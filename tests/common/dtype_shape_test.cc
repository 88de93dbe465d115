#include <limits>

#include "common/dtype.h"
#include "common/shape.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using ::testing::HasSubstr;

TEST(DTypeTest, SizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kF32), 4);
  EXPECT_EQ(DTypeSize(DType::kF64), 8);
  EXPECT_EQ(DTypeSize(DType::kF16), 2);
  EXPECT_EQ(DTypeSize(DType::kBF16), 2);
  EXPECT_EQ(DTypeSize(DType::kI8), 1);
  EXPECT_EQ(DTypeSize(DType::kI16), 2);
  EXPECT_EQ(DTypeSize(DType::kI32), 4);
  EXPECT_EQ(DTypeSize(DType::kI64), 8);
  EXPECT_EQ(DTypeSize(DType::kU8), 1);
  EXPECT_EQ(DTypeSize(DType::kBool), 1);
  for (int v = 1; v <= 10; ++v) {
    auto dtype = DTypeFromProtoValue(v);
    ASSERT_TRUE(dtype.ok());
    EXPECT_EQ(*ParseDType(DTypeName(*dtype)), *dtype);
  }
  EXPECT_EQ(*ParseDType("float32"), DType::kF32);
  EXPECT_EQ(*ParseDType("BF16"), DType::kBF16);
}

TEST(DTypeTest, Errors) {
  EXPECT_THAT(std::string(ParseDType("complex64").status().message()),
              HasSubstr("expected one of f32, f64, f16, bf16, i8, i16, i32, i64, u8, bool"));
  EXPECT_EQ(DTypeFromProtoValue(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DTypeFromProtoValue(11).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShapeTest, Basics) {
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({2, 3, 4}), 24);
  EXPECT_EQ(NumElements({2, 0, 4}), 0);
  EXPECT_EQ(TypedShapeToString(DType::kF32, {32, 32}), "f32[32,32]");
  EXPECT_EQ(ByteSize(DType::kF64, {3, 5}), 120);
  EXPECT_TRUE(ValidateShape({}, DType::kF32).ok());
}

TEST(ShapeTest, ValidationMessages) {
  EXPECT_THAT(std::string(ValidateShape({4, -3}, DType::kF32).message()),
              HasSubstr("shape[1] is -3; dimensions must be >= 0"));
  int64_t big = std::numeric_limits<int64_t>::max() / 2;
  EXPECT_THAT(std::string(ValidateShape({big, 4}, DType::kF32).message()), HasSubstr("overflows"));
  EXPECT_EQ(ValidateShape(Shape(17, 1), DType::kF32).code(), absl::StatusCode::kInvalidArgument);
  // 5 GiB of f32 is fine (no 32-bit limits anywhere).
  EXPECT_TRUE(ValidateShape({int64_t{5} << 28}, DType::kF32).ok());
  EXPECT_EQ(ByteSize(DType::kF32, {int64_t{5} << 28}), int64_t{5} << 30);
}

}  // namespace
}  // namespace placement
