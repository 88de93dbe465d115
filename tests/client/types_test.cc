// The client's enums are views of the one table of each in common/ (and of
// the wire enums): every value has the same number and the same name on all
// three, and a value the library does not know reads as "unspecified" /
// "unknown".
#include "placement/client/types.h"

#include "absl/strings/ascii.h"
#include "common/dtype.h"
#include "common/hardware.h"
#include "common/reduce_op.h"
#include "gtest/gtest.h"
#include "placement/client/tensors.h"
#include "placement/v1/types.pb.h"

namespace placement::client {
namespace {

namespace pb = placement::v1;

TEST(TypesTest, DTypesAgreeWithCommonAndTheWire) {
  const google::protobuf::EnumDescriptor* wire = pb::DType_descriptor();
  int known = 0;
  for (int i = 0; i < wire->value_count(); ++i) {
    const int value = wire->value(i)->number();
    absl::StatusOr<placement::DType> common = placement::DTypeFromProtoValue(value);
    if (value == 0) {
      EXPECT_FALSE(common.ok());
      EXPECT_EQ(DTypeName(static_cast<DType>(value)), "unspecified");
      continue;
    }
    ASSERT_TRUE(common.ok()) << wire->value(i)->name();
    ++known;
    const DType d = static_cast<DType>(value);
    EXPECT_EQ(DTypeName(d), placement::DTypeName(*common));
    EXPECT_EQ(ElementSize(d), placement::DTypeSize(*common));
    // The wire name is "DTYPE_" and the upper-cased short name.
    EXPECT_EQ(wire->value(i)->name(), "DTYPE_" + absl::AsciiStrToUpper(DTypeName(d)));
    EXPECT_EQ(*ParseDType(DTypeName(d)), d);
  }
  EXPECT_EQ(known, 10);
  EXPECT_EQ(DTypeName(static_cast<DType>(99)), "unspecified");
}

TEST(TypesTest, HardwareTypesAgreeWithCommonAndTheWire) {
  const google::protobuf::EnumDescriptor* wire = pb::HardwareType_descriptor();
  for (int i = 0; i < wire->value_count(); ++i) {
    const int value = wire->value(i)->number();
    if (value == 0) continue;
    absl::StatusOr<placement::HardwareType> common = placement::HardwareTypeFromProtoValue(value);
    ASSERT_TRUE(common.ok()) << wire->value(i)->name();
    const HardwareType h = static_cast<HardwareType>(value);
    EXPECT_EQ(HardwareTypeName(h), placement::HardwareTypeName(*common));
    EXPECT_EQ(wire->value(i)->name(),
              "HARDWARE_TYPE_" + absl::AsciiStrToUpper(HardwareTypeName(h)));
    EXPECT_EQ(*ParseHardwareType(HardwareTypeName(h)), h);
  }
  EXPECT_EQ(HardwareTypeName(static_cast<HardwareType>(99)), "unknown");
}

TEST(TypesTest, ReduceOpsAgreeWithCommonAndTheWire) {
  const google::protobuf::EnumDescriptor* wire = pb::ReduceOp_descriptor();
  for (int i = 0; i < wire->value_count(); ++i) {
    const int value = wire->value(i)->number();
    const ReduceOp op = static_cast<ReduceOp>(value);
    if (value == 0) {
      EXPECT_EQ(ReduceOpName(op), "unspecified");
      continue;
    }
    absl::StatusOr<placement::ReduceOp> common = placement::ReduceOpFromProtoValue(value);
    ASSERT_TRUE(common.ok()) << wire->value(i)->name();
    EXPECT_EQ(ReduceOpName(op), placement::ReduceOpName(*common));
    EXPECT_EQ(wire->value(i)->name(), "REDUCE_OP_" + absl::AsciiStrToUpper(ReduceOpName(op)));
    EXPECT_EQ(*ParseReduceOp(absl::AsciiStrToUpper(ReduceOpName(op))), op);
  }
  absl::StatusOr<ReduceOp> bad = ParseReduceOp("avg");
  EXPECT_EQ(bad.status().message(),
            "Unsupported reduce_type: avg. Use 'sum', 'mean', 'max', 'min' or 'prod'.");
}

}  // namespace
}  // namespace placement::client
