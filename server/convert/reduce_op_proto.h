// Wire <-> core for the enums every collective and tensor message carries
// (ReduceOp, SourceHandling). Shared by both gRPC edges -- the public
// handlers (server/service/) and the daemon-to-daemon calls (server/peer/)
// -- so both convert alike. Errors are INVALID_ARGUMENT naming the field
// and the value.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_CONVERT_REDUCE_OP_PROTO_H_
#define PLACEMENT_SERVER_CONVERT_REDUCE_OP_PROTO_H_

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/reduce_op.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

placement::v1::ReduceOp ReduceOpToProto(ReduceOp op);

// From placement.v1.ReduceOp's integer value. INVALID_ARGUMENT for
// REDUCE_OP_UNSPECIFIED (0) and unknown values.
absl::StatusOr<ReduceOp> ReduceOpFromProtoValue(int value);

// The op a request names: the enum when set, else `op_name`; nullopt when
// neither is set (the caller picks the default). INVALID_ARGUMENT when
// either is unknown, or both are set and disagree.
absl::StatusOr<std::optional<ReduceOp>> RequestedReduceOp(int proto_value,
                                                          absl::string_view op_name);

// UNSPECIFIED = KEEP. INVALID_ARGUMENT for values outside the enum.
absl::StatusOr<SourceHandling> SourceHandlingFromProto(int value);
placement::v1::SourceHandling SourceHandlingToProto(SourceHandling source);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CONVERT_REDUCE_OP_PROTO_H_
