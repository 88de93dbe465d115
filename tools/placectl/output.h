// Output helpers for placectl: JSON (from protos) or aligned text tables.
#ifndef PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_
#define PLACEMENT_TOOLS_PLACECTL_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/message.h"

namespace placement::placectl {

// One JSON object per message, with proto field names, defaults included.
std::string ToJson(const google::protobuf::Message& message);

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
