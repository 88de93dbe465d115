// Placement flags: how put / put-batch / place / prefetch / assemble say
// where tensors go. Exactly one of
//   --device=D                           the whole tensor on device D
//   --mesh=M [--spec=S] [--padded]       NamedSharding(M, P(S)); no --spec = replicated on M
//   --replicated=M                       every device of mesh M holds the whole tensor
//   --rule=shard_batch_dim --mesh=M [--batch_axis=0] [--mesh_axis=data]
//   --rule=replicate [--mesh=M | --devices=0,1,...]   (replicate_across_devices)
//   --rule=model_state --mesh=M [--param_sharding=replicate|shard]
//   --rule=data_partition --mesh=M [--partition=full|replicated]
// or none (the daemon's default device). Assemble takes a Placement only,
// and may add --partial=AXES [--partial_op=sum] to a --mesh placement.
//
// The Fromflags functions check everything that does not need the daemon:
// conflicting flags, a flag that belongs to another rule, an unparsable spec
// or device list, an unknown rule, param_sharding or partition. They return
// INVALID_ARGUMENT with the flag's name; the caller reports it as a usage
// error (exit 2).
#ifndef PLACEMENT_TOOLS_PLACECTL_RULES_H_
#define PLACEMENT_TOOLS_PLACECTL_RULES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "placement/client/rules.h"
#include "tools/placectl/session.h"

namespace placement::placectl {

// The flags RuleFromFlags reads (for the command table).
const std::vector<std::string>& RuleFlagNames();
// The flags PlacementFromFlags reads.
const std::vector<std::string>& PlacementFlagNames();

// nullopt when no placement flag was given.
absl::StatusOr<std::optional<client::Rule>> RuleFromFlags(const Session& session);
// --device, --mesh [--spec --padded --partial --partial_op] or --replicated;
// nullopt when none was given.
absl::StatusOr<std::optional<client::Placement>> PlacementFromFlags(const Session& session);

// "0,1,2" -> {0, 1, 2}; "" -> {}. INVALID_ARGUMENT "--devices entry 'x' is
// not an integer".
absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text, absl::string_view field);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_RULES_H_
