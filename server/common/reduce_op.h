// ReduceOp: the element-wise reductions collectives apply (JAX psum / pmean /
// pmax / pmin, DTensor Partial's reduce_op, NCCL's ncclRedOp_t), with the
// names the seed's `reduce_type` strings use and their proto values.
//
// Pure value helpers; thread-safe.
#ifndef PLACEMENT_SERVER_COMMON_REDUCE_OP_H_
#define PLACEMENT_SERVER_COMMON_REDUCE_OP_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placement::server {

enum class ReduceOp {
  kSum = 1,
  kMean = 2,
  kMax = 3,
  kMin = 4,
  kProd = 5,
};

// "sum", "mean", "max", "min", "prod".
absl::string_view ReduceOpName(ReduceOp op);

// Inverse of ReduceOpName, case-insensitive; "avg" and "average" are not
// accepted (the seed names the op "mean"). INVALID_ARGUMENT otherwise, in the
// seed's words: "Unsupported reduce_type: avg. Use 'sum', 'mean', 'max',
// 'min' or 'prod'."
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// From placement.v1.ReduceOp's integer value. INVALID_ARGUMENT for
// REDUCE_OP_UNSPECIFIED (0) and unknown values.
absl::StatusOr<ReduceOp> ReduceOpFromProtoValue(int value);

// The op a request names: the enum when set, else `op_name`; nullopt when
// neither is set (the caller picks the default). INVALID_ARGUMENT when
// either is unknown, or both are set and disagree.
absl::StatusOr<std::optional<ReduceOp>> RequestedReduceOp(int proto_value,
                                                          absl::string_view op_name);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COMMON_REDUCE_OP_H_
