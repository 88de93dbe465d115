// Every placectl command: its words, operands, flags and help text. The
// parser (args.h) checks operand counts and flags against this table before
// a command runs, and `placectl help` prints it.
#include <vector>

#include "tools/placectl/commands.h"
#include "tools/placectl/process_local_flags.h"
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

constexpr char kProcessLocalDetails[] =
    "multi-controller upload (a cluster: every node runs the same command on its own daemon\n"
    "with ITS part; the tensor commits once every node contributed, no bytes cross nodes):\n"
    "  --global_name=NAME [--global_shape=D,D,...] [--global_timeout=60s]\n"
    "  needs --mesh, --replicated or --rule=data_partition; the file is this node's part\n";

constexpr char kControllerDetails[] =
    "--controller=single|multi: on a tensor whose shards span daemons, single (default) lets\n"
    "this call drive every daemon; multi: every node runs the same command on its own daemon.\n";

std::vector<CommandSpec> BuildTable() {
  const std::vector<std::string> rule_flags = RuleFlagNames();
  const std::vector<std::string> upload_flags = Concat(rule_flags, ProcessLocalFlagNames());
  return {
      {.path = "devices",
       .summary = "list devices: platform, kind, hardware, memory in use / limit, node",
       .run = RunDevices},
      {.path = "info",
       .summary = "the seed's get_device_info(): device count, hardware type, platforms",
       .run = RunInfo},
      {.path = "status",
       .summary =
           "daemon version, backend, uptime, counts, bytes in use, serving/draining, cluster",
       .details = "The cluster section: state, epoch, and per process its state, peer address,\n"
                  "global device range and joins (restarts + 1).\n",
       .run = RunStatus},
      {.path = "trim",
       .summary = "give the daemon's cached device memory back to the system now",
       .details = "DaemonService.TrimMemory: every tenant's cached blocks (admins only with\n"
                  "authentication on), or with --tenant=T only tenant T's (a user may trim its\n"
                  "own). Prints the bytes released and the daemon's RSS before and after.\n",
       .flags = {"tenant"},
       .run = RunTrim},
      {.path = "batch-size",
       .summary = "the seed's batch-size recommendation plus the roofline figure",
       .flags = {"hardware"},
       .run = RunBatchSize},
      {.path = "validate-batch-size",
       .operands = "N",
       .summary = "the seed's validate_batch_size(N)",
       .details = "N may be zero or negative (the seed then reports it below the minimum).\n",
       .flags = {"hardware", "warn_suboptimal"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunValidateBatchSize},
      {.path = "top",
       .summary = "live view of devices, memory, transfers in flight and tensors (like nvidia-smi)",
       .details =
           "Refreshes every --interval until 'q' (or Ctrl-C); --once prints one frame,\n"
           "--iterations=N prints N frames. Uploads, downloads and prefetch streams in flight\n"
           "show the bytes moved and their rate (MB/s between two frames) and ETA. On a terminal\n"
           "each frame replaces the previous one and fits the window (redrawn on resize).\n",
       .flags = {"once", "iterations", "interval", "top_tensors"},
       .run = RunTop},
      {.path = "mesh create",
       .operands = "[NAME=SIZE,...]",
       .summary = "create a mesh from ordered axes or a preset",
       .details = "  placectl mesh create data=2,model=4 [--mesh_id=grid] [--devices=0,1,...]\n"
                  "  placectl mesh create --preset=data|model [--num_devices=N] [--axis_name=A]\n"
                  "  placectl mesh create --preset=hybrid --data_parallel=2 --model_parallel=4\n",
       .flags = {"mesh_id", "devices", "preset", "num_devices", "axis_name", "data_parallel",
                 "model_parallel", "data_axis", "model_axis"},
       .max_operands = 1,
       .run = RunMeshCreate},
      {.path = "mesh ls", .summary = "list meshes", .run = RunMeshList, .aliases = {"mesh list"}},
      {.path = "mesh info",
       .operands = "ID",
       .summary = "the seed's get_mesh_info plus the device grid",
       .min_operands = 1,
       .max_operands = 1,
       .run = RunMeshInfo},
      {.path = "mesh rm",
       .operands = "ID",
       .summary = "delete a mesh (--force: and the tensors on it)",
       .flags = {"force"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunMeshRemove,
       .aliases = {"mesh delete"}},
      {.path = "tensor put",
       .operands = "FILE.npy",
       .summary = "upload a .npy file (streamed)",
       .details = std::string(kRuleDetails) + kProcessLocalDetails,
       .flags = Concat({"name", "chunk_bytes"}, upload_flags),
       .min_operands = 1,
       .max_operands = 1,
       .run = RunTensorPut},
      {.path = "tensor put-batch",
       .operands = "KEY=FILE.npy...",
       .summary = "upload several .npy files as one pytree dict under one rule, all or nothing",
       .details =
           "The seed's distribute_batch({\"images\", \"labels\"}, P('data', None)):\n"
           "  placectl tensor put-batch images=x.npy labels=y.npy --mesh=grid --spec=data,None\n"
           "Spec entries beyond an array's rank must be None and are dropped.\n" +
           std::string(kRuleDetails) + kProcessLocalDetails +
           "  (loadax host_to_global_device_array: --rule=data_partition --mesh=M "
           "--global_name=batch)\n",
       .flags = Concat({"name", "chunk_bytes"}, upload_flags),
       .min_operands = 1,
       .max_operands = -1,
       .run = RunTensorPutBatch},
      {.path = "tensor get",
       .operands = "ID FILE.npy",
       .summary = "download the whole array (or --device: one shard; --process: one node's part)",
       .details =
           "--process=P: the distinct shards node P's devices hold, concatenated along dimension\n"
           "0 in index order (loadax global_to_host_array on that node).\n",
       .flags = {"device", "process", "chunk_bytes"},
       .min_operands = 2,
       .max_operands = 2,
       .run = RunTensorGet},
      {.path = "tensor get-shards",
       .operands = "ID DIR",
       .summary = "download every distinct shard (or --devices' shards) into DIR/device_<D>.npy",
       .flags = {"devices", "chunk_bytes"},
       .min_operands = 2,
       .max_operands = 2,
       .run = RunTensorGetShards},
      {.path = "tensor ls",
       .summary = "list tensors",
       .flags = {"name_prefix", "mesh"},
       .run = RunTensorList,
       .aliases = {"tensor list"}},
      {.path = "tensor describe",
       .operands = "ID",
       .summary = "sharding and every shard's device, index, replica",
       .min_operands = 1,
       .max_operands = 1,
       .run = RunTensorDescribe},
      {.path = "tensor rm",
       .operands = "[ID...]",
       .summary = "delete tensors by id, or every tensor named --prefix=P...",
       .flags = {"prefix"},
       .max_operands = -1,
       .run = RunTensorRemove,
       .aliases = {"tensor delete"}},
      {.path = "tensor place",
       .operands = "ID...",
       .summary = "device_put / reshard existing tensors",
       .details = kRuleDetails,
       .flags = Concat({"donate", "name"}, rule_flags),
       .min_operands = 1,
       .max_operands = -1,
       .run = RunTensorPlace},
      {.path = "tensor assemble",
       .operands = "SHAPE ID...",
       .summary = "make_array_from_single_device_arrays: one single-device tensor per device",
       .details =
           "SHAPE is the global shape (\"8,12\"; \"\" for a scalar). Placement: --mesh=M --spec=S\n"
           "[--padded] [--partial=AXES --partial_op=sum], --replicated=M or --device=D.\n",
       .flags = Concat({"donate", "name"}, PlacementFlagNames()),
       .min_operands = 2,
       .max_operands = -1,
       .run = RunTensorAssemble},
      {.path = "tensor disassemble",
       .operands = "ID",
       .summary = "split a tensor into single-device tensors, one per shard",
       .flags = {"donate"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunTensorDisassemble},
      {.path = "collective all-reduce",
       .operands = "ID",
       .summary = "all-reduce over mesh axes (psum / pmean)",
       .details =
           "--op: sum | mean | max | min | prod; default: the tensor's partial op, else sum.\n"
           "--axes: comma-separated mesh axes; default: every axis.\n" +
           std::string(kControllerDetails),
       .flags = {"op", "axes", "donate", "name", "controller"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunAllReduce},
      {.path = "collective all-reduce-batch",
       .operands = "ID...",
       .summary = "all-reduce several tensors in one fused call (a gradient pytree)",
       .details = kControllerDetails,
       .flags = {"op", "axes", "donate", "controller"},
       .min_operands = 1,
       .max_operands = -1,
       .run = RunAllReduceBatch},
      {.path = "collective all-gather",
       .operands = "ID",
       .summary = "shard -> replicate along --dim",
       .details = "--axes default: the axes sharding --dim.\n" + std::string(kControllerDetails),
       .flags = {"dim", "axes", "donate", "name", "controller"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunAllGather},
      {.path = "collective reduce-scatter",
       .operands = "ID",
       .summary = "partial -> shard along --dim",
       .details = "--axes default: the tensor's partial axes.\n" + std::string(kControllerDetails),
       .flags = {"op", "dim", "axes", "donate", "name", "controller"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunReduceScatter},
      {.path = "collective broadcast",
       .operands = "ID",
       .summary = "the --root device's shard to every device of its group",
       .details = kControllerDetails,
       .flags = {"root", "axes", "donate", "name", "controller"},
       .min_operands = 1,
       .max_operands = 1,
       .run = RunBroadcast},
      {.path = "prefetch",
       .operands = "DIR",
       .summary = "stream a directory of .npy batches through a prefetch pipeline",
       .details =
           "Batches: each DIR/*.npy file (one array, key --key), or each subdirectory of DIR\n"
           "(its *.npy files are the arrays, keyed by file stem), in name order. Prints one row\n"
           "per staged batch, then the daemon's stats. Staged tensors are freed at the end.\n" +
           std::string(kRuleDetails),
       .flags = Concat({"buffer_size", "key", "name", "chunk_bytes"}, rule_flags),
       .min_operands = 1,
       .max_operands = 1,
       .run = RunPrefetch},
  };
}

}  // namespace

const std::vector<CommandSpec>& CommandTable() {
  static const auto* table = new std::vector<CommandSpec>(BuildTable());
  return *table;
}

}  // namespace placement::placectl
