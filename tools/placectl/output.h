// Output helpers for placectl: aligned text tables and errors. JSON comes
// from the client library (placement/client/json.h, found by ADL).
#ifndef PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_
#define PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "placement/client/json.h"

namespace placement::placectl {

using client::ToJson;

// Left-aligned columns separated by two spaces; the first row is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// "placectl: NOT_FOUND: tensor t-1 does not exist" on stderr; returns 1.
int ReportError(const absl::Status& status);

// 1234567 -> "1.2 MiB".
std::string HumanBytes(int64_t bytes);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_
