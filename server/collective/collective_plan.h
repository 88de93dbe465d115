// CollectivePlan: what a collective on a sharded tensor means in terms of
// device groups and the result's layout -- the pure part of the collective
// service (no devices, no store), tested on its own.
//
// Every plan runs over `axes` of the tensor's mesh in the groups
// Mesh::AxisGroups(axes) returns (mesh positions; inside a group, ranks are
// ordered like JAX's axis_index over that tuple of axes). The rules:
//
//   AllReduce(axes, op)   each axis must be either a partial axis of the
//       tensor (DTensor Partial -> Replicate) or one of the axes sharding
//       dimension 0, which must then ALL be named (one block per device; the
//       result is the element-wise reduction of the blocks, shape
//       [shape[0] / n, ...]). Both kinds may be combined. Empty axes = every
//       mesh axis (the proto's contract).
//   AllGather(axes, dim)  the axes must be the minor-most (trailing) axes
//       sharding `dim`; the result drops them from the spec (tiled, like JAX
//       all_gather(tiled=True)). Empty axes = every axis sharding `dim`.
//   ReduceScatter(axes, op, dim)  every axis must be partial; the result
//       drops them from the partial axes and appends them (in the order
//       given) to dim's sharding (DTensor Partial -> Shard(dim)). The local
//       extent of `dim` must divide by the group size. Empty axes = every
//       partial axis.
//   Broadcast(axes, root) each axis must be partial (the root's contribution
//       becomes the value), replicated (copies are re-synchronised from the
//       root), or -- all of them -- the axes sharding dimension 0 (the root's
//       block becomes the value, as in AllReduce). Every group copies from
//       its member at the root's rank. Empty axes = every mesh axis.
//
// Codes: INVALID_ARGUMENT for an unknown or repeated axis, a dim out of
// range, indivisible extents; FAILED_PRECONDITION when the tensor's sharding
// does not have the required form (the message says how each axis is used
// and what the collective needs).
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_PLAN_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_PLAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/dtype.h"
#include "common/shape.h"
#include "common/sharding.h"
#include "server/collective/collective_engine.h"

namespace placement::server {

// The input of a plan: what the tensor is.
struct TensorLayout {
  DType dtype = DType::kF32;
  Shape shape;
  NamedSharding sharding = NamedSharding::SingleDevice(0);
};

struct CollectivePlan {
  CollectiveKind kind = CollectiveKind::kAllReduce;
  // The axes the collective runs over, in group-rank order.
  std::vector<std::string> axes;
  // Mesh positions of every group, each in rank order.
  std::vector<std::vector<int64_t>> groups;
  Shape result_shape;
  NamedSharding result_sharding = NamedSharding::SingleDevice(0);
  // result_sharding.IndexDomains(result_shape), worked out once per plan
  // (plans are cached) rather than once per result.
  std::vector<ShardDomain> result_domains;
  // AllGather / ReduceScatter: the dimension; Broadcast: the root's rank in
  // every group.
  int dim = 0;
  int root_rank = 0;
  // AllGather / ReduceScatter: true when every block along `dim` is one
  // contiguous byte range of the shard (all dimensions before `dim` have
  // extent 1 in the shard), so the engine can work on the shards directly;
  // false when the blocks must first be packed into (or unpacked from)
  // contiguous staging buffers.
  bool contiguous = true;
};

absl::StatusOr<CollectivePlan> PlanAllReduce(const TensorLayout& in,
                                             const std::vector<std::string>& axes);
absl::StatusOr<CollectivePlan> PlanAllGather(const TensorLayout& in,
                                             const std::vector<std::string>& axes, int64_t dim);
absl::StatusOr<CollectivePlan> PlanReduceScatter(const TensorLayout& in,
                                                 const std::vector<std::string>& axes,
                                                 int64_t scatter_dim);
// `root_position`: the root device's mesh position. REQUIRES: it is inside
// the mesh (the caller maps device ids and reports unknown ones).
absl::StatusOr<CollectivePlan> PlanBroadcast(const TensorLayout& in,
                                             const std::vector<std::string>& axes,
                                             int64_t root_position);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_PLAN_H_
