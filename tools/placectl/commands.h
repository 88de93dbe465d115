// placectl subcommands. Each takes the connected client and the positional
// arguments after the command word, prints its result, and returns the exit
// code (0 ok, 1 RPC error, 2 usage error).
#ifndef PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_
#define PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_

#include <string>
#include <vector>

#include "placement/client/client.h"

namespace placement::placectl {

struct GlobalOptions {
  bool json = false;
};

using Args = std::vector<std::string>;

int RunDevices(const client::Client& client, const GlobalOptions& options, const Args& args);
int RunInfo(const client::Client& client, const GlobalOptions& options, const Args& args);
int RunStatus(const client::Client& client, const GlobalOptions& options, const Args& args);
int RunBatchSize(const client::Client& client, const GlobalOptions& options, const Args& args);
int RunValidateBatchSize(const client::Client& client, const GlobalOptions& options,
                         const Args& args);

// `mesh create|ls|info|rm` and `tensor put|get|ls|describe|rm|place`; args[0]
// is the subcommand. Flags they define (reuse with ABSL_DECLARE_FLAG rather
// than defining them again): mesh_commands.cc --mesh_id --devices --preset
// --num_devices --axis_name --data_parallel --model_parallel --data_axis
// --model_axis --force; tensor_commands.cc --name --device --mesh --spec
// --padded --replicated --donate --name_prefix --chunk_bytes.
int RunMesh(const client::Client& client, const GlobalOptions& options, const Args& args);
int RunTensor(const client::Client& client, const GlobalOptions& options, const Args& args);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_
