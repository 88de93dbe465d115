// Text form of a PartitionSpec, as users type it on the command line or copy
// it from Python: "data,None", "(x,y),None", "P('data', None)",
// "PartitionSpec(\"data\",)", "" or "P()" (no entries: fully replicated).
// The printing side is PartitionSpec::ToString (common/sharding.h); what it
// prints parses back to the same spec.
//
// Pure function; thread-safe.
#ifndef PLACEMENT_COMMON_PARTITION_SPEC_TEXT_H_
#define PLACEMENT_COMMON_PARTITION_SPEC_TEXT_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sharding.h"

namespace placement {

// Entries are separated by commas outside parentheses; an entry is None
// ("None", "none", empty or "()"), one axis name (optionally quoted), or a
// parenthesised tuple of axis names. A trailing comma adds no entry, as in
// Python. INVALID_ARGUMENT naming the whole text (and the entry's index and
// text where one is at fault) for unbalanced parentheses, nested tuples, or
// an entry that is not an axis name.
absl::StatusOr<PartitionSpec> ParsePartitionSpec(absl::string_view text);

}  // namespace placement

#endif  // PLACEMENT_COMMON_PARTITION_SPEC_TEXT_H_
