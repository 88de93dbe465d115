// Every placectl command: its words, operands, flags and help text. The
// parser (args.h) checks operand counts and flags against this table before
// a command runs, and `placectl help` prints it.
#include <vector>

#include "tools/placectl/commands.h"
#include "tools/placectl/rules.h"

namespace placement::placectl {
namespace {

std::vector<std::string> Concat(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

constexpr char kRuleDetails[] =
    "placement (one of; none = the daemon's default device):\n"
    "  --device=D                               the whole tensor on device D\n"
    "  --mesh=M [--spec=S] [--padded]           NamedSharding(M, P(S)); no --spec: replicated\n"
    "  --replicated=M                           every device of mesh M holds the whole tensor\n"
    "  --rule=shard_batch_dim --mesh=M [--batch_axis=0] [--mesh_axis=data]\n"
    "  --rule=replicate [--mesh=M | --devices=0,1,...]   (replicate_across_devices)\n"
    "  --rule=model_state --mesh=M [--param_sharding=replicate|shard]\n"
    "  --rule=data_partition --mesh=M [--partition=full|replicated]\n";

std::vector<CommandSpec> BuildTable() {
  const std::vector<std::string> rule_flags = RuleFlagNames();
  return {
      {"devices", "", "list devices: platform, kind, hardware, memory in use / limit, node", "",
       {}, 0, 0, RunDevices},
      {"info", "", "the seed's get_device_info(): device count, hardware type, platforms", "", {},
       0, 0, RunInfo},
      {"status", "", "daemon version, backend, uptime, counts, bytes in use, serving/draining",
       "", {}, 0, 0, RunStatus},
      {"batch-size", "", "the seed's batch-size recommendation plus the roofline figure", "",
       {"hardware"}, 0, 0, RunBatchSize},
      {"validate-batch-size", "N", "the seed's validate_batch_size(N)",
       "N may be zero or negative (the seed then reports it below the minimum).\n",
       {"hardware", "warn_suboptimal"}, 1, 1, RunValidateBatchSize},
      {"top", "", "live view of devices, memory, tensors and prefetch streams (like nvidia-smi)",
       "Refreshes every --interval until interrupted; --once prints one frame, --iterations=N\n"
       "prints N frames. On a terminal each frame replaces the previous one.\n",
       {"once", "iterations", "interval", "top_tensors"}, 0, 0, RunTop},
      {"mesh create", "[NAME=SIZE,...]", "create a mesh from ordered axes or a preset",
       "  placectl mesh create data=2,model=4 [--mesh_id=grid] [--devices=0,1,...]\n"
       "  placectl mesh create --preset=data|model [--num_devices=N] [--axis_name=A]\n"
       "  placectl mesh create --preset=hybrid --data_parallel=2 --model_parallel=4\n",
       {"mesh_id", "devices", "preset", "num_devices", "axis_name", "data_parallel",
        "model_parallel", "data_axis", "model_axis"},
       0, 1, RunMeshCreate},
      {"mesh ls", "", "list meshes", "", {}, 0, 0, RunMeshList, {"mesh list"}},
      {"mesh info", "ID", "the seed's get_mesh_info plus the device grid", "", {}, 1, 1,
       RunMeshInfo},
      {"mesh rm", "ID", "delete a mesh (--force: and the tensors on it)", "", {"force"}, 1, 1,
       RunMeshRemove, {"mesh delete"}},
      {"tensor put", "FILE.npy", "upload a .npy file (streamed)", kRuleDetails,
       Concat({"name", "chunk_bytes"}, rule_flags), 1, 1, RunTensorPut},
      {"tensor put-batch", "KEY=FILE.npy...",
       "upload several .npy files as one pytree dict under one rule, all or nothing",
       "The seed's distribute_batch({\"images\", \"labels\"}, P('data', None)):\n"
       "  placectl tensor put-batch images=x.npy labels=y.npy --mesh=grid --spec=data,None\n"
       "Spec entries beyond an array's rank must be None and are dropped.\n" +
           std::string(kRuleDetails),
       Concat({"name", "chunk_bytes"}, rule_flags), 1, -1, RunTensorPutBatch},
      {"tensor get", "ID FILE.npy", "download the whole array (or --device: one shard)", "",
       {"device", "chunk_bytes"}, 2, 2, RunTensorGet},
      {"tensor get-shards", "ID DIR",
       "download every distinct shard (or --devices' shards) into DIR/device_<D>.npy", "",
       {"devices", "chunk_bytes"}, 2, 2, RunTensorGetShards},
      {"tensor ls", "", "list tensors", "", {"name_prefix", "mesh"}, 0, 0, RunTensorList,
       {"tensor list"}},
      {"tensor describe", "ID", "sharding and every shard's device, index, replica", "", {}, 1, 1,
       RunTensorDescribe},
      {"tensor rm", "[ID...]", "delete tensors by id, or every tensor named --prefix=P...", "",
       {"prefix"}, 0, -1, RunTensorRemove, {"tensor delete"}},
      {"tensor place", "ID...", "device_put / reshard existing tensors", kRuleDetails,
       Concat({"donate", "name"}, rule_flags), 1, -1, RunTensorPlace},
      {"tensor assemble", "SHAPE ID...",
       "make_array_from_single_device_arrays: one single-device tensor per device",
       "SHAPE is the global shape (\"8,12\"; \"\" for a scalar). Placement: --mesh=M --spec=S\n"
       "[--padded] [--partial=AXES --partial_op=sum], --replicated=M or --device=D.\n",
       Concat({"donate", "name"}, PlacementFlagNames()), 2, -1, RunTensorAssemble},
      {"tensor disassemble", "ID", "split a tensor into single-device tensors, one per shard", "",
       {"donate"}, 1, 1, RunTensorDisassemble},
      {"collective all-reduce", "ID", "all-reduce over mesh axes (psum / pmean)",
       "--op: sum | mean | max | min | prod; default: the tensor's partial op, else sum.\n"
       "--axes: comma-separated mesh axes; default: every axis.\n",
       {"op", "axes", "donate", "name"}, 1, 1, RunAllReduce},
      {"collective all-reduce-batch", "ID...",
       "all-reduce several tensors in one fused call (a gradient pytree)", "",
       {"op", "axes", "donate"}, 1, -1, RunAllReduceBatch},
      {"collective all-gather", "ID", "shard -> replicate along --dim",
       "--axes default: the axes sharding --dim.\n", {"dim", "axes", "donate", "name"}, 1, 1,
       RunAllGather},
      {"collective reduce-scatter", "ID", "partial -> shard along --dim",
       "--axes default: the tensor's partial axes.\n", {"op", "dim", "axes", "donate", "name"}, 1,
       1, RunReduceScatter},
      {"collective broadcast", "ID", "the --root device's shard to every device of its group",
       "", {"root", "axes", "donate", "name"}, 1, 1, RunBroadcast},
      {"prefetch", "DIR", "stream a directory of .npy batches through a prefetch pipeline",
       "Batches: each DIR/*.npy file (one array, key --key), or each subdirectory of DIR\n"
       "(its *.npy files are the arrays, keyed by file stem), in name order. Prints one row\n"
       "per staged batch, then the daemon's stats. Staged tensors are freed at the end.\n" +
           std::string(kRuleDetails),
       Concat({"buffer_size", "key", "name", "chunk_bytes"}, rule_flags), 1, 1, RunPrefetch},
  };
}

}  // namespace

const std::vector<CommandSpec>& CommandTable() {
  static const auto* table = new std::vector<CommandSpec>(BuildTable());
  return *table;
}

}  // namespace placement::placectl
