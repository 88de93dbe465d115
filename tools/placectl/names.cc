#include "tools/placectl/names.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace placement::placectl {
namespace pb = placement::v1;
namespace {

// "PREFIX_REST" -> "rest".
std::string Lower(const std::string& enum_name, absl::string_view prefix) {
  absl::string_view rest = enum_name;
  absl::ConsumePrefix(&rest, prefix);
  return absl::AsciiStrToLower(rest);
}

}  // namespace

std::string HardwareName(pb::HardwareType type) {
  return Lower(pb::HardwareType_Name(type), "HARDWARE_TYPE_");
}

std::string ReduceOpName(pb::ReduceOp op) { return Lower(pb::ReduceOp_Name(op), "REDUCE_OP_"); }

absl::StatusOr<pb::ReduceOp> ParseReduceOp(absl::string_view text, absl::string_view field) {
  for (pb::ReduceOp op : {pb::REDUCE_OP_SUM, pb::REDUCE_OP_MEAN, pb::REDUCE_OP_MAX,
                          pb::REDUCE_OP_MIN, pb::REDUCE_OP_PROD}) {
    if (absl::EqualsIgnoreCase(text, ReduceOpName(op))) return op;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be sum, mean, max, min or prod, got '", text, "'"));
}

}  // namespace placement::placectl
