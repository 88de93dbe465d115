// Output helpers for placectl: aligned text tables, errors, JSON quoting.
// JSON of results comes from the client library (placement/client/json.h:
// the proto3 JSON mapping of the wire message, as grpcurl prints it).
#ifndef PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_
#define PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "placement/client/json.h"

namespace placement::placectl {

using client::ToJson;

// `text` as a JSON string literal, quotes included.
std::string JsonQuote(absl::string_view text);

// Left-aligned columns separated by two spaces; the first row is the header.
std::string FormatTable(const std::vector<std::vector<std::string>>& rows);

// "placectl: NOT_FOUND: tensor t-1 does not exist" on stderr; returns 1.
int ReportError(const absl::Status& status);

// 1234567 -> "1.2 MiB".
std::string HumanBytes(int64_t bytes);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_
