// placectl commands. Each runner receives the session and the operands after
// its command words (already counted against the command table), checks the
// rest of its input, connects only then (Session::client), prints its result
// (a table, or JSON with --json) and returns the exit code: 0 ok, 1 the call
// or a local file failed (the gRPC code and message on stderr), 2 usage.
//
// Flags are absl flags defined in the file that owns them, and reused by
// others with ABSL_DECLARE_FLAG: rules.cc the placement flags (see rules.h),
// mesh_commands.cc --mesh_id --devices --preset --num_devices --axis_name
// --data_parallel --model_parallel --data_axis --model_axis --force,
// tensor_commands.cc --name --donate --name_prefix --prefix --chunk_bytes,
// device_commands.cc --hardware --warn_suboptimal, collective_commands.cc
// --op --axes --dim --root, prefetch_commands.cc --buffer_size --key,
// top_command.cc --once --iterations --interval --top_tensors, main.cc the
// global flags --target --json --timeout_seconds --connect_timeout.
#ifndef PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_
#define PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_

#include <vector>

#include "tools/placectl/args.h"
#include "tools/placectl/session.h"

namespace placement::placectl {

// Every command, in the order `placectl help` lists them (command_table.cc).
const std::vector<CommandSpec>& CommandTable();

// device_commands.cc
int RunDevices(Session& session, const Args& operands);
int RunInfo(Session& session, const Args& operands);
int RunStatus(Session& session, const Args& operands);
int RunTrim(Session& session, const Args& operands);
int RunBatchSize(Session& session, const Args& operands);
int RunValidateBatchSize(Session& session, const Args& operands);

// mesh_commands.cc
int RunMeshCreate(Session& session, const Args& operands);
int RunMeshList(Session& session, const Args& operands);
int RunMeshInfo(Session& session, const Args& operands);
int RunMeshRemove(Session& session, const Args& operands);

// tensor_commands.cc
int RunTensorPut(Session& session, const Args& operands);
int RunTensorGet(Session& session, const Args& operands);
int RunTensorList(Session& session, const Args& operands);
int RunTensorDescribe(Session& session, const Args& operands);
int RunTensorRemove(Session& session, const Args& operands);
int RunTensorPlace(Session& session, const Args& operands);

// tensor_group_commands.cc
int RunTensorPutBatch(Session& session, const Args& operands);
int RunTensorGetShards(Session& session, const Args& operands);
int RunTensorAssemble(Session& session, const Args& operands);
int RunTensorDisassemble(Session& session, const Args& operands);

// collective_commands.cc
int RunAllReduce(Session& session, const Args& operands);
int RunAllReduceBatch(Session& session, const Args& operands);
int RunAllGather(Session& session, const Args& operands);
int RunReduceScatter(Session& session, const Args& operands);
int RunBroadcast(Session& session, const Args& operands);

// prefetch_commands.cc
int RunPrefetch(Session& session, const Args& operands);

// top_command.cc
int RunTop(Session& session, const Args& operands);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_COMMANDS_H_
