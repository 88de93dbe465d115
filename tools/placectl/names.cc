#include "tools/placectl/names.h"

#include "absl/strings/str_cat.h"

namespace placement::placectl {

std::string HardwareName(client::HardwareType type) {
  return std::string(client::HardwareTypeName(type));
}

absl::StatusOr<client::ReduceOp> ParseReduceOp(absl::string_view text, absl::string_view field) {
  absl::StatusOr<client::ReduceOp> op = client::ParseReduceOp(text);
  if (op.ok()) return op;
  return absl::InvalidArgumentError(
      absl::StrCat(field, " must be sum, mean, max, min or prod, got '", text, "'"));
}

}  // namespace placement::placectl
