// Multi-controller upload flags of `tensor put` / `tensor put-batch`:
//   --global_name=NAME [--global_shape=D,D,...] [--global_timeout=60s]
// Every node's placectl uploads its host-local part to its own daemon under
// the same NAME; the tensor commits once every process contributed
// (client::ProcessLocal, docs/cluster.md).
//
// ProcessLocalFromFlags checks everything that does not need the daemon --
// a flag without --global_name, --name with it, an empty or over-long name,
// a negative or non-integer dimension, a timeout <= 0, and a placement that
// is not over a mesh (the protocol takes a sharding, a replicated mesh or
// --rule=data_partition) -- and returns INVALID_ARGUMENT naming the flag;
// the caller reports it as a usage error (exit 2).
#ifndef PLACEMENT_TOOLS_PLACECTL_PROCESS_LOCAL_FLAGS_H_
#define PLACEMENT_TOOLS_PLACECTL_PROCESS_LOCAL_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/rules.h"
#include "placement/client/tensors.h"
#include "tools/placectl/session.h"

namespace placement::placectl {

// The flags ProcessLocalFromFlags reads (for the command table).
const std::vector<std::string>& ProcessLocalFlagNames();

// nullopt when --global_name was not given. `rule` is the command's
// placement (RuleFromFlags; nullopt = the default device).
absl::StatusOr<std::optional<client::ProcessLocal>> ProcessLocalFromFlags(
    const Session& session, const std::optional<client::Rule>& rule);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_PROCESS_LOCAL_FLAGS_H_
