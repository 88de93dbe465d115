// loadax's placement helpers (loadax.sharding.placement, seed 002) over the
// daemon, as free functions with the seed's names and defaults:
//
//   auto batch = host_to_global_device_array(*client, {{"x", x}, {"y", y}}, *mesh);
//   auto rows = global_to_host_array(*client, *batch);    // this node's rows
//
// host_to_global_device_array uploads every leaf in one UploadBatch stream
// straight into the data partition (Rule::DataPartition): kFull splits
// dimension 0 over the product of every mesh axis, kReplicated copies the
// array to every mesh device. The daemon's errors are loadax's: "([10,3])
// cannot be sharded across 8 devices.".
//
// On a cluster (docs/cluster.md) loadax is multi-controller: every node's
// trainer calls host_to_global_device_array with ITS rows and the same
// `global_name` on its own daemon; the arrays commit once every process
// contributed, with global shape [rows x processes, ...] for kFull (the
// host shape for kReplicated), and no bytes cross nodes. Without a
// global_name the host arrays are the whole global arrays (one trainer, or
// one daemon: process_count 1). global_to_host_array then gives each node
// its own part back (a Download of the process's shards on its daemon).
//
// Thread-safe; the Client must outlive the calls.
#ifndef PLACEMENT_CLIENT_LOADAX_H_
#define PLACEMENT_CLIENT_LOADAX_H_

#include <string>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_tree.h"
#include "placement/client/tensors.h"
#include "placement/client/types.h"

namespace placement::client {

// host_to_global_device_array(host_arrays, partition=FULL) over `mesh`
// (loadax takes the mesh from the `with mesh:` context). A non-empty
// `global_name` makes it the multi-controller upload above (tensors named
// "<global_name>/<key>"; the daemon waits up to 60 s for the other
// processes). A partition other than kFull / kReplicated is
// INVALID_ARGUMENT "Unsupported partition: 7" before any call; an empty
// tree is returned as is.
absl::StatusOr<TensorTree> host_to_global_device_array(
    const Client& client, const HostTree& host_arrays, const MeshRef& mesh,
    DataPartition partition = DataPartition::kFull, const std::string& global_name = "");
// The same with every ProcessLocal field (global_shape, timeout).
absl::StatusOr<TensorTree> host_to_global_device_array(const Client& client,
                                                       const HostTree& host_arrays,
                                                       const MeshRef& mesh, DataPartition partition,
                                                       const ProcessLocal& process_local);

// global_to_host_array(global_arrays, partition=FULL): this daemon's part
// of each array, as host bytes. kFull: the distinct shards held by this
// daemon's process (GetStatus().process_index), concatenated along
// dimension 0 in index order (a Download of DownloadSelection::Process);
// kReplicated: the first shard this process holds (a Download of that
// device's shard). Each result's header carries dtype, shape and pieces.
// INVALID_ARGUMENT before any download for an unsupported partition, and
// for kFull a rank-0 leaf or leaves whose dimension 0 differs ("batch size
// mismatch"); NOT_FOUND when this process holds no shard of a leaf. Leaves
// without TensorInfo are described first. An empty tree is returned as is.
absl::StatusOr<DownloadedTree> global_to_host_array(const Client& client,
                                                    const TensorTree& global_arrays,
                                                    DataPartition partition = DataPartition::kFull);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_LOADAX_H_
