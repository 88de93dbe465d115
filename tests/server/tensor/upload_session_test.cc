#include "server/tensor/upload_session.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::DownloadWhole;
using testing::ExpectShardsMatch;
using testing::PatternBytes;
using testing::ReplicatedRule;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;
namespace pb = placement::v1;

struct Case {
  std::string label;
  DType dtype;
  Shape shape;
  pb::PlacementRule rule;
};

std::vector<Case> Cases(TestRig& rig) {
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}});
  const std::string yx = rig.CreateMesh({{"x", 4}, {"y", 2}}, {7, 5, 3, 1, 6, 4, 2, 0});
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  return {
      {"single device f32[4,6]", DType::kF32, {4, 6}, DeviceRule(3)},
      {"P(x,y) f32[4,8]", DType::kF32, {4, 8}, ShardingRule(xy, {{"x"}, {"y"}})},
      {"P(None,y) i16[3,8]", DType::kI16, {3, 8}, ShardingRule(xy, {{}, {"y"}})},
      {"P((y,x)) f64[8,3]", DType::kF64, {8, 3}, ShardingRule(xy, {{"y", "x"}})},
      {"P(y) custom order bf16[4,2,3]", DType::kBF16, {4, 2, 3}, ShardingRule(yx, {{"x"}, {"y"}})},
      {"replicated u8[5,7]", DType::kU8, {5, 7}, ReplicatedRule(r8)},
      {"padded P(x,y) f32[7,5]",
       DType::kF32,
       {7, 5},
       ShardingRule(xy, {{"x"}, {"y"}}, pb::SHARDING_MODE_PADDED)},
      {"padded P(r) i32[3,2]",
       DType::kI32,
       {3, 2},
       ShardingRule(r8, {{"r"}}, pb::SHARDING_MODE_PADDED)},
      {"scalar i64[] replicated", DType::kI64, {}, ReplicatedRule(xy)},
      {"P(None,None,y) i8[2,3,4]", DType::kI8, {2, 3, 4}, ShardingRule(xy, {{}, {}, {"y"}})},
  };
}

TEST(UploadSessionTest, EveryChunkSizeClassScattersCorrectly) {
  TestRig rig;
  for (const Case& c : Cases(rig)) {
    const int64_t bytes = ByteSize(c.dtype, c.shape);
    const std::string data = PatternBytes(bytes, static_cast<uint32_t>(bytes));
    // Every residue class modulo the element size and the row size, plus the
    // whole tensor in one chunk.
    for (int64_t chunk : {int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{7}, int64_t{8},
                          int64_t{13}, int64_t{17}, int64_t{64}, bytes}) {
      if (chunk <= 0) continue;
      SCOPED_TRACE(c.label + ", chunk " + std::to_string(chunk));
      auto tensor = UploadBytes(*rig.ops, c.dtype, c.shape, c.rule, data, chunk);
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      ExpectShardsMatch(**tensor, data);
      auto back = DownloadWhole(*rig.ops, (*tensor)->id, /*chunk=*/chunk + 3);
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, data);
      ASSERT_TRUE(rig.store->Delete({(*tensor)->id}).ok());
    }
  }
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(UploadSessionTest, TwoChunksSplitAtEveryByteOffset) {
  TestRig rig;
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}});
  const Shape shape = {4, 6};
  const std::string data = PatternBytes(96, 7);
  for (const auto& rule :
       {ShardingRule(xy, {{"x"}, {}}), ShardingRule(xy, {{}, {"y"}}, pb::SHARDING_MODE_PADDED),
        ShardingRule(xy, {{"y"}, {"x"}})}) {
    for (int64_t split = 0; split <= 96; ++split) {
      SCOPED_TRACE("split " + std::to_string(split));
      auto session = rig.ops->StartUpload(TensorSpec{DType::kF32, shape, "", ""}, rule);
      ASSERT_TRUE(session.ok()) << session.status();
      ASSERT_TRUE((*session)->Write(absl::string_view(data).substr(0, split)).ok());
      ASSERT_TRUE((*session)->Write(absl::string_view(data).substr(split)).ok());
      auto tensor = (*session)->Commit();
      ASSERT_TRUE(tensor.ok()) << tensor.status();
      ExpectShardsMatch(**tensor, data);
      ASSERT_TRUE(rig.store->Delete({(*tensor)->id}).ok());
    }
  }
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(UploadSessionTest, TooFewBytesNamesTheNumbersAndFreesEverything) {
  TestRig rig;
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  auto session =
      rig.ops->StartUpload(TensorSpec{DType::kF32, {32, 32}, "", ""}, ReplicatedRule(r8));
  ASSERT_TRUE(session.ok());
  EXPECT_EQ(rig.MemoryInUse(), 8 * 4096);
  ASSERT_TRUE((*session)->Write(PatternBytes(4000)).ok());
  auto tensor = (*session)->Commit();
  ASSERT_EQ(tensor.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(tensor.status().message(), "expected 4096 bytes for f32[32,32], got 4000");
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ(rig.store->size(), 0);
}

TEST(UploadSessionTest, TooManyBytesFailsAtTheWriteAndFreesEverything) {
  TestRig rig;
  auto session = rig.ops->StartUpload(TensorSpec{DType::kI32, {10}, "", ""}, DeviceRule(1));
  ASSERT_TRUE(session.ok());
  ASSERT_TRUE((*session)->Write(PatternBytes(36)).ok());
  absl::Status status = (*session)->Write(PatternBytes(8));
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "expected 40 bytes for i32[10], got at least 44");
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ((*session)->Write("x").code(), absl::StatusCode::kFailedPrecondition);
}

TEST(UploadSessionTest, OverBudgetFailsAtStartWithMemoryBackToZero) {
  // 6 KiB per device: one buffer of up to a page (charged the page and its
  // 2 KiB record) fills a device.
  TestRig rig(/*num_devices=*/4, /*device_memory=*/6144);
  const std::string r4 = rig.CreateMesh({{"r", 4}});
  // 8 KiB on one 6 KiB device.
  auto single = rig.ops->StartUpload(TensorSpec{DType::kF32, {2048}, "", ""}, DeviceRule(0));
  EXPECT_EQ(single.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(single.status().message().find("cannot allocate 8192 bytes"), std::string::npos)
      << single.status();
  // Replicated 4100 bytes (two pages each): fails on the first device, nothing left on any.
  auto replicated =
      rig.ops->StartUpload(TensorSpec{DType::kU8, {4100}, "", ""}, ReplicatedRule(r4));
  EXPECT_EQ(replicated.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rig.MemoryInUse(), 0);
  // Sharded 4 KiB over 4 devices fits exactly.
  const std::string data = PatternBytes(4096);
  auto sharded = UploadBytes(*rig.ops, DType::kF32, {1024}, ShardingRule(r4, {{"r"}}), data, 1000);
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  EXPECT_EQ(rig.MemoryInUse(), 4096);
  // A second one does not fit anywhere; the first is untouched.
  auto second = rig.ops->StartUpload(TensorSpec{DType::kU8, {8}, "", ""}, DeviceRule(2));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(rig.MemoryInUse(), 4096);
  EXPECT_EQ(*DownloadWhole(*rig.ops, (*sharded)->id), data);
}

TEST(UploadSessionTest, AbortAndDestructionFreeEverything) {
  TestRig rig;
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  {
    auto session =
        rig.ops->StartUpload(TensorSpec{DType::kF64, {64, 64}, "", ""}, ShardingRule(r8, {{"r"}}));
    ASSERT_TRUE(session.ok());
    ASSERT_TRUE((*session)->Write(PatternBytes(10000)).ok());
    EXPECT_EQ(rig.MemoryInUse(), 64 * 64 * 8);
  }  // destroyed mid-upload
  EXPECT_EQ(rig.MemoryInUse(), 0);
  auto session = rig.ops->StartUpload(TensorSpec{DType::kF64, {64}, "", ""}, ReplicatedRule(r8));
  ASSERT_TRUE(session.ok());
  (*session)->Abort();
  EXPECT_EQ(rig.MemoryInUse(), 0);
  EXPECT_EQ((*session)->Write("abc").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*session)->Commit().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(rig.store->size(), 0);
}

TEST(UploadSessionTest, RejectsPartialShardingsAndBadShapes) {
  TestRig rig;
  const std::string xy = rig.CreateMesh({{"x", 2}, {"y", 4}});
  auto partial = rig.ops->StartUpload(TensorSpec{DType::kF32, {4}, "", ""},
                                      ShardingRule(xy, {{"x"}}, pb::SHARDING_MODE_EVEN, {"y"}));
  EXPECT_EQ(partial.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(partial.status().message().find("partial"), std::string::npos);
  auto negative = rig.ops->StartUpload(TensorSpec{DType::kF32, {4, -3}, "", ""}, DeviceRule(0));
  EXPECT_EQ(negative.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.status().message().find("-3"), std::string::npos);
  EXPECT_EQ(rig.MemoryInUse(), 0);
}

TEST(UploadSessionTest, ZeroByteTensorsCommitWithoutChunks) {
  TestRig rig;
  const std::string r8 = rig.CreateMesh({{"r", 8}});
  auto tensor = UploadBytes(*rig.ops, DType::kF32, {0, 5}, ShardingRule(r8, {{"r"}}), "");
  ASSERT_TRUE(tensor.ok()) << tensor.status();
  EXPECT_EQ((*tensor)->logical_bytes(), 0);
  EXPECT_EQ(*DownloadWhole(*rig.ops, (*tensor)->id), "");
}

TEST(UploadSessionTest, OwnerQuotaIsEnforcedAndReleased) {
  TestRig rig(/*num_devices=*/2, /*device_memory=*/1 << 20, /*max_bytes_per_owner=*/1000);
  auto a1 = rig.ops->StartUpload(TensorSpec{DType::kU8, {800}, "", "alice"}, DeviceRule(0));
  ASSERT_TRUE(a1.ok());
  EXPECT_EQ(rig.store->OwnerBytes("alice"), 800);
  auto a2 = rig.ops->StartUpload(TensorSpec{DType::kU8, {800}, "", "alice"}, DeviceRule(1));
  EXPECT_EQ(a2.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(a2.status().message().find("owner 'alice'"), std::string::npos) << a2.status();
  auto b = rig.ops->StartUpload(TensorSpec{DType::kU8, {800}, "", "bob"}, DeviceRule(1));
  EXPECT_TRUE(b.ok());
  a1->reset();
  EXPECT_EQ(rig.store->OwnerBytes("alice"), 0);
  EXPECT_EQ(rig.MemoryInUse(), 800);
}

}  // namespace
}  // namespace placement::server
