// The one spelling placectl uses for each enum in tables and arguments: the
// seeds' lower-case names ("h100", "tpu_v5e", "cpu", "sum", "mean"), the same
// in every command. JSON output keeps the proto enum names (proto JSON).
#ifndef PLACEMENT_TOOLS_PLACECTL_NAMES_H_
#define PLACEMENT_TOOLS_PLACECTL_NAMES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/v1/types.pb.h"

namespace placement::placectl {

// HARDWARE_TYPE_TPU_V5E -> "tpu_v5e"; the value the daemon prints as
// hardware_type_name. "unspecified" for 0.
std::string HardwareName(placement::v1::HardwareType type);
// REDUCE_OP_MEAN -> "mean".
std::string ReduceOpName(placement::v1::ReduceOp op);
// "sum" | "mean" | "max" | "min" | "prod" (any case). INVALID_ARGUMENT naming
// `field`, the text and the accepted names otherwise.
absl::StatusOr<placement::v1::ReduceOp> ParseReduceOp(absl::string_view text,
                                                      absl::string_view field);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_NAMES_H_
