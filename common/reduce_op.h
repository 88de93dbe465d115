// ReduceOp: the element-wise reductions collectives apply (JAX psum / pmean /
// pmax / pmin, DTensor Partial's reduce_op, NCCL's ncclRedOp_t), with the
// names the seed's `reduce_type` strings use. The one table of these names:
// the daemon, the C++ client (client::ReduceOpName / ParseReduceOp) and
// placectl use it, and the Python client is tested against it
// (tests/python/placement/test_tables.py). The wire enum
// (placement.v1.ReduceOp) has the same values; the daemon converts it at the
// edge (server/service/from_proto.h, to_proto.h).
//
// Pure value helpers; thread-safe.
#ifndef PLACEMENT_COMMON_REDUCE_OP_H_
#define PLACEMENT_COMMON_REDUCE_OP_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placement {

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

// From the proto enum's integer value; INVALID_ARGUMENT for UNSPECIFIED or
// unknown values.
absl::StatusOr<ReduceOp> ReduceOpFromProtoValue(int value);

}  // namespace placement

#endif  // PLACEMENT_COMMON_REDUCE_OP_H_
