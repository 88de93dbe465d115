// The one spelling placectl uses for each enum in tables and arguments: the
// seeds' lower-case names ("h100", "tpu_v5e", "cpu", "sum", "mean"), the same
// in every command. JSON output keeps the proto enum names (client::ToJson).
#ifndef PLACEMENT_TOOLS_PLACECTL_NAMES_H_
#define PLACEMENT_TOOLS_PLACECTL_NAMES_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/client/types.h"

namespace placement::placectl {

// HardwareType::kTpuV5e -> "tpu_v5e"; the value the daemon prints as
// hardware_type_name.
std::string HardwareName(client::HardwareType type);
// "sum" | "mean" | "max" | "min" | "prod" (any case). INVALID_ARGUMENT naming
// `field`, the text and the accepted names otherwise.
absl::StatusOr<client::ReduceOp> ParseReduceOp(absl::string_view text, absl::string_view field);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_NAMES_H_
