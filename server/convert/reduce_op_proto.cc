#include "server/convert/reduce_op_proto.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

namespace pb = placement::v1;

pb::ReduceOp ReduceOpToProto(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return pb::REDUCE_OP_SUM;
    case ReduceOp::kMean:
      return pb::REDUCE_OP_MEAN;
    case ReduceOp::kMax:
      return pb::REDUCE_OP_MAX;
    case ReduceOp::kMin:
      return pb::REDUCE_OP_MIN;
    case ReduceOp::kProd:
      return pb::REDUCE_OP_PROD;
  }
  return pb::REDUCE_OP_UNSPECIFIED;
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

absl::StatusOr<SourceHandling> SourceHandlingFromProto(int value) {
  switch (value) {
    case pb::SOURCE_HANDLING_UNSPECIFIED:
    case pb::SOURCE_HANDLING_KEEP:
      return SourceHandling::kKeep;
    case pb::SOURCE_HANDLING_DONATE:
      return SourceHandling::kDonate;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("source is ", value,
                       "; expected SOURCE_HANDLING_KEEP (1) or SOURCE_HANDLING_DONATE (2)"));
  }
}

pb::SourceHandling SourceHandlingToProto(SourceHandling source) {
  return source == SourceHandling::kDonate ? pb::SOURCE_HANDLING_DONATE : pb::SOURCE_HANDLING_KEEP;
}

}  // namespace placement::server
