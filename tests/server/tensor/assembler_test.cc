#include "server/tensor/assembler.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/server/tensor/tensor_test_util.h"

namespace placement::server {
namespace {

using testing::DeviceRule;
using testing::DownloadWhole;
using testing::ExtractBox;
using testing::PatternBytes;
using testing::ReplicatedRule;
using testing::ShardBytes;
using testing::ShardingRule;
using testing::TestRig;
using testing::UploadBytes;
namespace pb = placement::v1;

class AssemblerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    r4_ = rig_.CreateMesh({{"r", 4}}, {3, 1, 0, 2});
    data_ = PatternBytes(8 * 3 * 4, 5);
    auto t =
        UploadBytes(*rig_.ops, DType::kF32, shape_, ShardingRule(r4_, {{"r"}}), data_, 10, "w");
    ASSERT_TRUE(t.ok()) << t.status();
    source_ = (*t)->id;
  }
  std::vector<std::string> Ids(const std::vector<std::shared_ptr<const Tensor>>& tensors) {
    std::vector<std::string> ids;
    for (const auto& t : tensors) ids.push_back(t->id);
    return ids;
  }
  testing::TestPlacement Target() { return ShardingRule(r4_, {{"r"}}).placement(); }

  TestRig rig_;
  std::string r4_;
  Shape shape_ = {8, 3};
  std::string data_;
  std::string source_;
};

TEST_F(AssemblerTest, DisassembleThenAssembleRoundTripsWithCopies) {
  auto pieces = rig_.ops->Disassemble(source_, SourceHandling::kKeep);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  ASSERT_EQ(pieces->size(), 4u);
  const std::vector<int64_t> mesh_order = {3, 1, 0, 2};
  for (size_t i = 0; i < 4; ++i) {
    const Tensor& piece = *(*pieces)[i];
    EXPECT_EQ(piece.shards.front().domain.device_id, mesh_order[i]);
    EXPECT_EQ(piece.shape, (Shape{2, 3}));
    EXPECT_EQ(piece.name, "w/shard-" + std::to_string(i));
    EXPECT_EQ(ShardBytes(piece.shards.front()),
              ExtractBox(data_, shape_, {{int64_t(2 * i), int64_t(2 * i + 2)}, {0, 3}}, 4));
  }
  EXPECT_TRUE(rig_.store->Get(source_).ok());
  EXPECT_EQ(rig_.MemoryInUse(), 2 * 96);
  // Any order of ids.
  std::vector<std::string> ids = Ids(*pieces);
  std::swap(ids[0], ids[3]);
  auto assembled = rig_.ops->Assemble(shape_, Target(), ids, SourceHandling::kKeep, "again");
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ((*assembled)->name, "again");
  EXPECT_EQ(*DownloadWhole(*rig_.ops, (*assembled)->id), data_);
  EXPECT_EQ(rig_.MemoryInUse(), 3 * 96);
}

TEST_F(AssemblerTest, DonationMovesBuffersWithoutCopies) {
  auto pieces = rig_.ops->Disassemble(source_, SourceHandling::kDonate);
  ASSERT_TRUE(pieces.ok()) << pieces.status();
  EXPECT_EQ(rig_.store->Get(source_).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(rig_.MemoryInUse(), 96);
  const void* first_buffer = (*pieces)[0]->shards.front().buffer->data();
  std::vector<std::string> ids = Ids(*pieces);
  pieces->clear();
  auto assembled = rig_.ops->Assemble(shape_, Target(), ids, SourceHandling::kDonate, "");
  ASSERT_TRUE(assembled.ok()) << assembled.status();
  EXPECT_EQ(rig_.MemoryInUse(), 96);
  EXPECT_EQ((*assembled)->shards.front().buffer->data(), first_buffer);
  for (const std::string& id : ids) EXPECT_FALSE(rig_.store->Get(id).ok());
  EXPECT_EQ(*DownloadWhole(*rig_.ops, (*assembled)->id), data_);
  ASSERT_TRUE(rig_.store->Delete({(*assembled)->id}).ok());
  assembled->reset();
  EXPECT_EQ(rig_.MemoryInUse(), 0);
}

TEST_F(AssemblerTest, DonatingAPieceInUseTakesNothing) {
  auto pieces = rig_.ops->Disassemble(source_, SourceHandling::kKeep);
  ASSERT_TRUE(pieces.ok());
  std::vector<std::string> ids = Ids(*pieces);
  std::shared_ptr<const Tensor> held = (*pieces)[2];
  pieces->clear();
  auto assembled = rig_.ops->Assemble(shape_, Target(), ids, SourceHandling::kDonate, "");
  EXPECT_EQ(assembled.status().code(), absl::StatusCode::kFailedPrecondition);
  for (const std::string& id : ids) EXPECT_TRUE(rig_.store->Get(id).ok());
  EXPECT_EQ(rig_.MemoryInUse(), 2 * 96);
}

// A tensor's memory is one tenant's (DeviceBuffer::owner): pieces of two
// tenants are never donated into one tensor.
TEST_F(AssemblerTest, DonatedPiecesMustBeOneTenants) {
  auto pieces = rig_.ops->Disassemble(source_, SourceHandling::kKeep);
  ASSERT_TRUE(pieces.ok());
  std::vector<std::string> ids = Ids(*pieces);
  auto other = rig_.store->Allocate(DType::kF32, {2, 3}, NamedSharding::SingleDevice(3), "", "",
                                    TensorOwner("b", ""));
  ASSERT_TRUE(other.ok()) << other.status();
  ids[0] = rig_.store->Commit(*std::move(other))->id;
  pieces->clear();
  auto assembled = rig_.ops->Assemble(shape_, Target(), ids, SourceHandling::kDonate, "");
  EXPECT_EQ(assembled.status().code(), absl::StatusCode::kFailedPrecondition) << assembled.status();
  EXPECT_NE(assembled.status().message().find("to tenant 'b'"), std::string::npos)
      << assembled.status();
  for (const std::string& id : ids) EXPECT_TRUE(rig_.store->Get(id).ok());
}

TEST_F(AssemblerTest, ErrorsNameTheDeviceAndShapes) {
  auto pieces = rig_.ops->Disassemble(source_, SourceHandling::kKeep);
  ASSERT_TRUE(pieces.ok());
  std::vector<std::string> ids = Ids(*pieces);
  const int64_t before = rig_.MemoryInUse();
  auto expect_invalid = [&](const std::vector<std::string>& use, const Shape& shape,
                            const testing::TestPlacement& target, const std::string& fragment) {
    auto r = rig_.ops->Assemble(shape, target, use, SourceHandling::kKeep, "");
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find(fragment), std::string::npos) << r.status();
  };
  // Missing device 2 (the last in mesh order).
  expect_invalid({ids[0], ids[1], ids[2]}, shape_, Target(), "no tensor on device 2");
  // Wrong global shape -> wrong shard shape.
  expect_invalid(ids, {12, 3}, Target(), "has shape [2,3], but");
  expect_invalid(ids, {12, 3}, Target(), "expects shard shape [3,3] on device 3");
  // Two pieces on one device.
  auto extra = UploadBytes(*rig_.ops, DType::kF32, {2, 3}, DeviceRule(1), PatternBytes(24));
  ASSERT_TRUE(extra.ok());
  expect_invalid({ids[0], ids[1], ids[2], ids[3], (*extra)->id}, shape_, Target(),
                 "are both on device 1");
  // A piece outside the target's devices.
  auto outside = UploadBytes(*rig_.ops, DType::kF32, {2, 3}, DeviceRule(6), PatternBytes(24));
  ASSERT_TRUE(outside.ok());
  expect_invalid({ids[0], ids[1], ids[2], ids[3], (*outside)->id}, shape_, Target(),
                 "is on device 6, which is not a device of");
  // Dtype mismatch.
  auto ints = UploadBytes(*rig_.ops, DType::kI32, {2, 3}, DeviceRule(0), PatternBytes(24));
  ASSERT_TRUE(ints.ok());
  expect_invalid({ids[0], ids[1], (*ints)->id, ids[3]}, shape_, Target(), "has dtype i32");
  // Not single-device; repeated ids; none.
  expect_invalid({source_}, shape_, Target(), "not a single-device tensor");
  expect_invalid({ids[0], ids[0]}, shape_, Target(), "twice");
  expect_invalid({}, shape_, Target(), "tensor_ids is empty");
  EXPECT_EQ(
      rig_.ops->Assemble(shape_, Target(), {"t-nope"}, SourceHandling::kKeep, "").status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(rig_.MemoryInUse(), before + 3 * 24);
}

TEST_F(AssemblerTest, ReplicatedAndPartialTargets) {
  const std::string r2 = rig_.CreateMesh({{"r", 2}}, {4, 5});
  const std::string a_bytes = PatternBytes(24, 1), b_bytes = PatternBytes(24, 2);
  auto a = UploadBytes(*rig_.ops, DType::kF32, {2, 3}, DeviceRule(4), a_bytes);
  auto b = UploadBytes(*rig_.ops, DType::kF32, {2, 3}, DeviceRule(5), b_bytes);
  ASSERT_TRUE(a.ok() && b.ok());
  // Replicated: every piece is the whole array (JAX trusts they are equal).
  auto replicated = rig_.ops->Assemble({2, 3}, ReplicatedRule(r2).placement(), {(*a)->id, (*b)->id},
                                       SourceHandling::kKeep, "");
  ASSERT_TRUE(replicated.ok()) << replicated.status();
  EXPECT_EQ((*replicated)->shards[1].domain.replica_id, 1);
  // Partial: each piece is its device's contribution.
  auto partial =
      rig_.ops->Assemble({2, 3}, ShardingRule(r2, {}, pb::SHARDING_MODE_EVEN, {"r"}).placement(),
                         {(*b)->id, (*a)->id}, SourceHandling::kKeep, "");
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_EQ((*partial)->partial_op, ReduceOp::kSum);
  EXPECT_EQ(ShardBytes((*partial)->shards[0]), a_bytes);
  EXPECT_EQ(ShardBytes((*partial)->shards[1]), b_bytes);
  EXPECT_EQ(DownloadWhole(*rig_.ops, (*partial)->id).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto pieces = rig_.ops->Disassemble((*partial)->id, SourceHandling::kKeep);
  ASSERT_TRUE(pieces.ok());
  EXPECT_EQ(ShardBytes((*pieces)[1]->shards[0]), b_bytes);
}

TEST_F(AssemblerTest, DisassembleErrors) {
  EXPECT_EQ(rig_.ops->Disassemble("t-nope", SourceHandling::kKeep).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(rig_.ops->Disassemble("t-nope", SourceHandling::kDonate).status().code(),
            absl::StatusCode::kNotFound);
  auto held = rig_.store->Get(source_);
  EXPECT_EQ(rig_.ops->Disassemble(source_, SourceHandling::kDonate).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(rig_.store->Get(source_).ok());
}

}  // namespace
}  // namespace placement::server
