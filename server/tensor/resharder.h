// Reshard: device_put of an existing tensor to a new sharding (or device),
// device to device, without a trip through the client or a gathered copy.
//
// For every destination shard, only the boxes it intersects are copied, each
// from one source shard holding that box: the one on the destination's own
// device when a replica lives there, otherwise replica 0. Copies are batched
// into one backend Copy per (source shard, destination shard) pair.
//
// Peak extra device memory is the destination shards. The source is never
// modified; on any error the partial destination is freed and the source is
// as it was.
//
// In a cluster only this daemon's destination shards are made (the others
// stay without a buffer; each daemon makes its own): a box no shard on this
// daemon holds is streamed from the daemon that does (RemoteShards::OpenBox,
// through a chunk-sized staging buffer), so only the boxes each destination
// needs cross the network.
//
// Thread-safe for distinct destinations (the source is only read).
#ifndef PLACEMENT_SERVER_TENSOR_RESHARDER_H_
#define PLACEMENT_SERVER_TENSOR_RESHARDER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// A new, uncommitted tensor with `source`'s dtype, shape and bytes under
// `target`. FAILED_PRECONDITION when the source has partial axes (it has no
// single value to move); INVALID_ARGUMENT when the target is partial or does
// not fit the shape; RESOURCE_EXHAUSTED for device budgets or quota.
absl::StatusOr<std::unique_ptr<Tensor>> Reshard(TensorStore* store, const Tensor& source,
                                                const ResolvedSharding& target, std::string name,
                                                TensorOwner owner, RemoteShards* remote = nullptr);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_RESHARDER_H_
