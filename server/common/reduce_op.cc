#include "server/common/reduce_op.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace placement::server {
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
  if (value >= static_cast<int>(ReduceOp::kSum) && value <= static_cast<int>(ReduceOp::kProd)) {
    return static_cast<ReduceOp>(value);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("op: unknown ReduceOp value ", value,
                   "; expected REDUCE_OP_SUM, REDUCE_OP_MEAN, REDUCE_OP_MAX, REDUCE_OP_MIN or "
                   "REDUCE_OP_PROD"));
}

absl::StatusOr<std::optional<ReduceOp>> RequestedReduceOp(int proto_value,
                                                          absl::string_view op_name) {
  if (proto_value == 0 && op_name.empty()) return std::optional<ReduceOp>();
  if (proto_value == 0) {
    absl::StatusOr<ReduceOp> named = ParseReduceOp(op_name);
    if (!named.ok()) return named.status();
    return std::optional<ReduceOp>(*named);
  }
  absl::StatusOr<ReduceOp> op = ReduceOpFromProtoValue(proto_value);
  if (!op.ok()) return op.status();
  if (!op_name.empty()) {
    absl::StatusOr<ReduceOp> named = ParseReduceOp(op_name);
    if (!named.ok()) return named.status();
    if (*named != *op) {
      return absl::InvalidArgumentError(absl::StrCat(
          "op is ", ReduceOpName(*op), " but op_name is '", op_name, "'; set one of them"));
    }
  }
  return std::optional<ReduceOp>(*op);
}

}  // namespace placement::server
