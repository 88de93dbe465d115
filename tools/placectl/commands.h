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

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_
