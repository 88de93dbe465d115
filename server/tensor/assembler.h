// Assemble and Disassemble: the bridge between a sharded tensor and its
// per-device pieces (JAX make_array_from_single_device_arrays and
// Array.addressable_shards; loadax host_to_global / global_to_host).
//
// Assemble rules (JAX's): the target sharding over `global_shape` needs
// exactly one single-device tensor on each of its devices, each shaped like
// that device's shard, all of one dtype. With kDonate the pieces' buffers
// become the shards without copying (they already sit on the right devices)
// and the pieces disappear; with kKeep each piece is copied. Partial
// shardings are allowed: each piece is that device's contribution.
//
// Disassemble: one single-device tensor per shard, in mesh order, replicas
// included. kDonate moves the shard buffers; kKeep copies them.
//
// Both return uncommitted tensors; the caller commits them. On error nothing
// is taken from the store and everything allocated is freed.
//
// Quota: donated buffers keep the charges they had (an assembled tensor keeps
// its pieces' charges; disassembled pieces share the source's charge until
// the last of them is gone).
//
// In a cluster each daemon runs these for the shards of its own devices:
// shards of other daemons' devices stay without a buffer (and their pieces
// are records only); server/cluster/cluster_ops.h commits the parts.
//
// Thread-safe (the store is).
#ifndef PLACEMENT_SERVER_TENSOR_ASSEMBLER_H_
#define PLACEMENT_SERVER_TENSOR_ASSEMBLER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/tensor.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// INVALID_ARGUMENT: no or repeated ids, a piece that is not single-device, a
// dtype or shape mismatch (naming the device and both shapes), a device of
// the target with no piece or two pieces, a piece on a device outside the
// target, a bad global shape. NOT_FOUND: unknown ids. FAILED_PRECONDITION
// (kDonate): a piece is in use by another operation. RESOURCE_EXHAUSTED
// (kKeep): device budgets or quota.
absl::StatusOr<std::unique_ptr<Tensor>> AssembleTensor(TensorStore* store, Shape global_shape,
                                                       const ResolvedSharding& target,
                                                       const std::vector<std::string>& piece_ids,
                                                       SourceHandling source, std::string name);

// The checks AssembleTensor makes before it takes or allocates anything (all
// of its INVALID_ARGUMENT and NOT_FOUND errors, and the donated pieces'
// tenants), over the pieces' records: what a cluster's driver runs before
// any daemon takes its pieces, so that a request refused leaves them all.
// Returns the first piece (the result takes its dtype and owner).
absl::StatusOr<std::shared_ptr<const Tensor>> CheckAssemble(
    const TensorStore& store, const Shape& global_shape, const ResolvedSharding& target,
    const std::vector<std::string>& piece_ids, SourceHandling source);

// NOT_FOUND: unknown id. FAILED_PRECONDITION (kDonate): the tensor is in use.
// RESOURCE_EXHAUSTED (kKeep): device budgets or quota. Pieces are named
// "<name>/shard-<i>" when the tensor has a name.
absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> DisassembleTensor(TensorStore* store,
                                                                       const std::string& id,
                                                                       SourceHandling source);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_ASSEMBLER_H_
