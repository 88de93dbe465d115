#include "common/hardware.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace placement {
namespace {

using ::testing::HasSubstr;

TEST(HardwareTypeTest, NamesRoundTrip) {
  const std::vector<std::pair<HardwareType, std::string>> names = {
      {HardwareType::kTpuV5e, "tpu_v5e"}, {HardwareType::kTpuV5p, "tpu_v5p"},
      {HardwareType::kTpuV4, "tpu_v4"},   {HardwareType::kH100, "h100"},
      {HardwareType::kA100, "a100"},      {HardwareType::kV100, "v100"},
      {HardwareType::kCpu, "cpu"},        {HardwareType::kUnknown, "unknown"},
      {HardwareType::kH200, "h200"},      {HardwareType::kB200, "b200"}};
  for (const auto& [type, name] : names) {
    EXPECT_EQ(HardwareTypeName(type), name);
    auto parsed = ParseHardwareType(name);
    ASSERT_TRUE(parsed.ok()) << name;
    EXPECT_EQ(*parsed, type);
  }
  EXPECT_EQ(*ParseHardwareType("H100"), HardwareType::kH100);
  EXPECT_EQ(*ParseHardwareType("HARDWARE_TYPE_TPU_V5E"), HardwareType::kTpuV5e);
}

TEST(HardwareTypeTest, UnknownNameListsAcceptedValues) {
  auto parsed = ParseHardwareType("tpu_v9");
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(parsed.status().message()),
              HasSubstr("tpu_v5e, tpu_v5p, tpu_v4, h100, a100, v100, cpu, unknown, h200, b200"));
  EXPECT_EQ(HardwareTypeFromProtoValue(42).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(HardwareTypeFromProtoValue(0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(DetectHardwareTypeTest, SeedRulesFirstMatchWins) {
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v5e"), HardwareType::kTpuV5e);
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v5 lite"), HardwareType::kTpuV5e);
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v5p"), HardwareType::kTpuV5p);
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v4"), HardwareType::kTpuV4);
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v5"), HardwareType::kTpuV5p);  // we differ from the seed
  EXPECT_EQ(DetectHardwareType("tpu", "TPU v3"), HardwareType::kTpuV4);
  EXPECT_EQ(DetectHardwareType("gpu", "NVIDIA H100 80GB HBM3"), HardwareType::kH100);
  EXPECT_EQ(DetectHardwareType("gpu", "NVIDIA H200"), HardwareType::kH200);
  EXPECT_EQ(DetectHardwareType("gpu", "NVIDIA B200"), HardwareType::kB200);
  EXPECT_EQ(DetectHardwareType("gpu", "NVIDIA A100-SXM4-80GB"), HardwareType::kA100);
  EXPECT_EQ(DetectHardwareType("gpu", "Tesla V100-SXM2-16GB"), HardwareType::kV100);
  EXPECT_EQ(DetectHardwareType("gpu", "NVIDIA GeForce RTX 4090"), HardwareType::kUnknown);
  EXPECT_EQ(DetectHardwareType("cpu", "cpu"), HardwareType::kCpu);
  EXPECT_EQ(DetectHardwareType("rocm", "MI300X"), HardwareType::kUnknown);
  EXPECT_EQ(DetectHardwareType("", ""), HardwareType::kUnknown);
}

struct Row {
  HardwareType type;
  int64_t min, optimal, critical;
  const char* notes;
};

TEST(BatchSizeRecommendationTest, SeedTableVerbatim) {
  const std::vector<Row> rows = {
      {HardwareType::kTpuV5e, 64, 256, 240, "Critical batch size for reaching roofline on TPU v5e."},
      {HardwareType::kTpuV5p, 128, 512, 480, "Higher throughput variant, benefits from larger batches."},
      {HardwareType::kTpuV4, 64, 256, 192,
       "Similar characteristics to TPU v5e but slightly lower critical batch."},
      {HardwareType::kH100, 64, 320, 298, "Critical batch size for reaching roofline on H100."},
      {HardwareType::kA100, 32, 256, 240, "A100 80GB variant. 40GB variant may need smaller batches."},
      {HardwareType::kV100, 16, 128, 96, "Older generation, memory-limited on 16GB variant."},
      {HardwareType::kCpu, 1, 32, 16, "CPU is memory-bandwidth bound, smaller batches often sufficient."},
      {HardwareType::kUnknown, 32, 128, 64, "Conservative defaults for unknown hardware."},
      // Not in the seed's table: the UNKNOWN row's numbers.
      {HardwareType::kH200, 32, 128, 64, "Conservative defaults for unknown hardware."},
      {HardwareType::kB200, 32, 128, 64, "Conservative defaults for unknown hardware."},
  };
  for (const Row& row : rows) {
    BatchSizeRecommendation rec = GetBatchSizeRecommendation(row.type);
    EXPECT_EQ(rec.hardware_type, row.type);
    EXPECT_EQ(rec.min_batch_size, row.min) << HardwareTypeName(row.type);
    EXPECT_EQ(rec.optimal_batch_size, row.optimal) << HardwareTypeName(row.type);
    EXPECT_EQ(rec.critical_batch_size, row.critical) << HardwareTypeName(row.type);
    EXPECT_EQ(rec.notes, row.notes);
    EXPECT_FALSE(rec.max_memory_batch_size.has_value());
  }
}

TEST(BatchSizeRecommendationTest, RooflineWhereHardwareIsKnown) {
  const std::vector<std::pair<HardwareType, double>> expected = {
      {HardwareType::kH100, 295}, {HardwareType::kH200, 206}, {HardwareType::kA100, 153},
      {HardwareType::kV100, 139}, {HardwareType::kTpuV5e, 240}, {HardwareType::kTpuV4, 229},
      {HardwareType::kTpuV5p, 166}, {HardwareType::kB200, 281}};
  for (const auto& [type, ratio] : expected) {
    auto roofline = GetBatchSizeRecommendation(type).roofline;
    ASSERT_TRUE(roofline.has_value()) << HardwareTypeName(type);
    EXPECT_NEAR(roofline->critical_batch_size, ratio, 1.0) << HardwareTypeName(type);
    EXPECT_NEAR(roofline->peak_flops_per_second / roofline->memory_bytes_per_second,
                roofline->critical_batch_size, 1e-9);
    EXPECT_FALSE(roofline->source.empty());
  }
  EXPECT_FALSE(GetRoofline(HardwareType::kCpu).has_value());
  EXPECT_FALSE(GetRoofline(HardwareType::kUnknown).has_value());
}

TEST(ValidateBatchSizeTest, SeedRulesAndMessages) {
  // Rule 1: below minimum, including zero and negatives.
  for (int64_t b : {int64_t{-5}, int64_t{0}, int64_t{63}}) {
    auto v = ValidateBatchSize(b, true, HardwareType::kH100);
    EXPECT_FALSE(v.valid);
    EXPECT_EQ(v.message, "Batch size " + std::to_string(b) +
                             " is below minimum recommended 64 for h100. Performance will be "
                             "significantly degraded.");
  }
  // Rule 2: below critical with warn_suboptimal.
  auto below = ValidateBatchSize(100, true, HardwareType::kH100);
  EXPECT_TRUE(below.valid);
  EXPECT_EQ(below.message,
            "Batch size 100 is below critical size 298 for h100. Consider increasing for optimal "
            "throughput.");
  // Without warn_suboptimal the same size is merely acceptable.
  auto quiet = ValidateBatchSize(100, false, HardwareType::kH100);
  EXPECT_TRUE(quiet.valid);
  EXPECT_EQ(quiet.message, "Batch size 100 is acceptable for h100.");
  // Rule 3: at or above optimal.
  EXPECT_EQ(ValidateBatchSize(320, true, HardwareType::kH100).message,
            "Batch size 320 is optimal for h100.");
  // Rule 4: between critical and optimal.
  EXPECT_EQ(ValidateBatchSize(300, true, HardwareType::kH100).message,
            "Batch size 300 is acceptable for h100.");
  // CPU: min 1, critical 16, optimal 32.
  EXPECT_EQ(ValidateBatchSize(1, true, HardwareType::kCpu).message,
            "Batch size 1 is below critical size 16 for cpu. Consider increasing for optimal "
            "throughput.");
  EXPECT_EQ(ValidateBatchSize(0, true, HardwareType::kCpu).message,
            "Batch size 0 is below minimum recommended 1 for cpu. Performance will be "
            "significantly degraded.");
}

TEST(ValidateBatchSizeTest, DivisibilityWarningDoesNotChangeTheVerdict) {
  auto v = ValidateBatchSize(33, true, HardwareType::kCpu, 8);
  EXPECT_TRUE(v.valid);
  EXPECT_EQ(v.message, "Batch size 33 is optimal for cpu.");
  ASSERT_EQ(v.warnings.size(), 1u);
  EXPECT_THAT(v.warnings[0], HasSubstr("not divisible by the 8 data-parallel devices"));
  EXPECT_TRUE(ValidateBatchSize(32, true, HardwareType::kCpu, 8).warnings.empty());
}

}  // namespace
}  // namespace placement
