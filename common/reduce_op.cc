#include "common/reduce_op.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace placement {
namespace {

constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin,
                                ReduceOp::kProd};

}  // namespace

absl::string_view ReduceOpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return "sum";
    case ReduceOp::kMean:
      return "mean";
    case ReduceOp::kMax:
      return "max";
    case ReduceOp::kMin:
      return "min";
    case ReduceOp::kProd:
      return "prod";
  }
  return "unknown";
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (ReduceOp op : kAllOps) {
    if (lower == ReduceOpName(op)) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat("Unsupported reduce_type: ", name,
                                                 ". Use 'sum', 'mean', 'max', 'min' or 'prod'."));
}

absl::StatusOr<ReduceOp> ReduceOpFromProtoValue(int value) {
  for (ReduceOp op : kAllOps) {
    if (static_cast<int>(op) == value) return op;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "reduce op must be one of sum, mean, max, min, prod (got enum value ", value, ")"));
}

}  // namespace placement
