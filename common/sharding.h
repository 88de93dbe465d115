// PartitionSpec and NamedSharding: how a global tensor is split over a Mesh.
//
// A NamedSharding is a Mesh plus a PartitionSpec (per tensor dimension: no
// axis, one axis, or an ordered tuple of axes) plus optional partial axes
// (PyTorch DTensor `Partial`: devices that differ only on a partial axis hold
// summands of the value rather than copies). Its index map is exactly JAX's
// `NamedSharding(mesh, spec).devices_indices_map(shape)`:
//
//   * For dimension d sharded by axes (a1, a2, ...), n = product of their
//     sizes, and a device's shard index k along d is the mixed-radix number of
//     its mesh coordinates on a1, a2, ... (first listed most significant).
//   * kEven (the default, JAX's behaviour): d must be divisible by n; the
//     device holds [k*block, (k+1)*block) with block = d/n.
//   * kPadded (explicit opt-in, XLA / torch.chunk style): block = ceil(d/n);
//     the device holds [min(k*block, d), min((k+1)*block, d)), so the last
//     shards are short or empty.
//   * Axes not named in the spec, and partial axes, replicate.
//   * Devices are listed in row-major mesh order (mesh.device_ids() order).
//     replica_id counts earlier devices holding the same box and the same
//     partial_index; partial_index is the mixed-radix coordinate on the
//     partial axes in listed order.
//
// Worked example. Mesh(x=2, y=4) over device ids [0..7] (row-major, so the
// device at position p has coordinates (p / 4, p % 4)); shape [8, 6]:
//
//   P('x', 'y')   with kPadded: dim 0 split 2 ways (block 4), dim 1 split 4
//                 ways (block ceil(6/4) = 2):
//                   device 0 (0,0): [0,4) x [0,2)    device 4 (1,0): [4,8) x [0,2)
//                   device 1 (0,1): [0,4) x [2,4)    ...
//                   device 3 (0,3): [0,4) x [6,6)    (empty: padded tail)
//                 With kEven this is INVALID_ARGUMENT: 6 is not divisible by 4.
//   P(('y', 'x')) dim 0 split 8 ways, k = 2*y + x ('y' most significant):
//                   device 0 (0,0): [0,1), device 4 (1,0): [1,2),
//                   device 1 (0,1): [2,3), device 5 (1,1): [3,4), ...
//                 every shard is unique, so all replica_ids are 0.
//   P(None, 'x')  dim 1 split 2 ways, 'y' replicates:
//                   devices 0,1,2,3 hold [0,8) x [0,3), replica_ids 0,1,2,3;
//                   devices 4,5,6,7 hold [0,8) x [3,6), replica_ids 0,1,2,3.
//   P('x') with partial_axes {'y'}: devices 0..3 hold [0,4) x [0,6) with
//                 partial_index 0,1,2,3 and replica_id 0 each.
//
// Errors follow JAX: an unknown axis, an axis used twice, a spec longer than
// the tensor's rank, and (in kEven mode) a dimension not divisible by its
// shard count are INVALID_ARGUMENT.
//
// This is pure geometry (no devices, no I/O). PartitionSpec and NamedSharding
// are value types; NamedSharding is immutable and thread-compatible.
#ifndef PLACEMENT_COMMON_SHARDING_H_
#define PLACEMENT_COMMON_SHARDING_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/mesh.h"
#include "common/region.h"  // IndexRange, Box
#include "common/shape.h"

namespace placement {

struct PartitionSpec {
  // Per tensor dimension, the mesh axes that shard it (first listed most
  // significant); an empty entry means None (not sharded). Dimensions beyond
  // dims.size() are not sharded.
  std::vector<std::vector<std::string>> dims;

  // "P('data', None, ('x', 'y'))"; "P()" when empty.
  std::string ToString() const;
  bool operator==(const PartitionSpec&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const PartitionSpec& p) {
    return H::combine(std::move(h), p.dims);
  }
};

// How a dimension that is not divisible by its shard count is handled.
enum class ShardingMode {
  kEven,    // INVALID_ARGUMENT (JAX's behaviour).
  kPadded,  // ceil-sized blocks; trailing shards short or empty (XLA, torch.chunk).
};

// "even" / "padded".
std::string_view ShardingModeName(ShardingMode mode);

// What one device holds of a global tensor.
struct ShardDomain {
  int64_t device_id = 0;
  int64_t mesh_position = 0;
  // Global index ranges; in padded mode the last shards are short or empty
  // (begin == end).
  Box box;
  // Extents of `box`.
  Shape shard_shape;
  // Number of earlier (row-major) devices with the same box AND the same
  // partial_index.
  int64_t replica_id = 0;
  // Mixed-radix coordinate on the partial axes (0 when there are none).
  int64_t partial_index = 0;

  bool operator==(const ShardDomain&) const = default;
};

class NamedSharding {
 public:
  // INVALID_ARGUMENT when the spec or partial_axes name an axis the mesh lacks
  // (the message names it and lists the mesh axes), when an axis is used twice
  // (within the spec, within partial_axes, or in both), or when `mode` is not
  // a ShardingMode value.
  static absl::StatusOr<NamedSharding> Create(Mesh mesh, PartitionSpec spec,
                                              std::vector<std::string> partial_axes = {},
                                              ShardingMode mode = ShardingMode::kEven);
  // P() over `mesh`, no partial axes: every device holds the whole tensor.
  static NamedSharding Replicated(Mesh mesh);
  // Replicated over Mesh::SingleDevice(device_id).
  static NamedSharding SingleDevice(int64_t device_id);

  const Mesh& mesh() const { return mesh_; }
  const PartitionSpec& spec() const { return spec_; }
  const std::vector<std::string>& partial_axes() const { return partial_axes_; }
  ShardingMode mode() const { return mode_; }

  // OK when the sharding applies to a tensor of `shape`. INVALID_ARGUMENT
  // when a dimension is negative; when the spec is longer than the rank
  // ("... is only valid for values of rank at least 3, but was applied to a
  // value of rank 2"); in kEven mode when a dimension is not divisible by its
  // shard count (the message names the dimension index, its size, the
  // divisor, the axes and the full shape, and suggests SHARDING_MODE_PADDED).
  absl::Status ValidateFor(absl::Span<const int64_t> shape) const;

  // One entry per mesh device, in row-major mesh order. Fails as ValidateFor.
  // O(num_devices * rank).
  absl::StatusOr<std::vector<ShardDomain>> IndexDomains(absl::Span<const int64_t> shape) const;

  // Product of the sizes of the axes sharding dimension `dim` (1 when the
  // dimension is None or beyond the spec).
  int64_t NumShardsAlong(int dim) const;
  // Product of the sizes of the partial axes (1 when there are none): how many
  // summands make up the value.
  int64_t NumPartials() const;
  // Every device holds the whole value: no dimension is split more than once
  // and no partial axis has size > 1 (size-1 axes shard nothing, as in JAX's
  // is_fully_replicated).
  bool IsFullyReplicated() const;

  // "NamedSharding(Mesh(data=8), P('data'))", with ", partial=('y')" and
  // ", mode=padded" appended when they apply.
  std::string ToString() const;
  bool operator==(const NamedSharding&) const = default;
  template <typename H>
  friend H AbslHashValue(H h, const NamedSharding& s) {
    return H::combine(std::move(h), s.mesh_, s.spec_, s.partial_axes_, s.mode_);
  }

 private:
  NamedSharding(Mesh mesh, PartitionSpec spec, std::vector<std::string> partial_axes,
                ShardingMode mode);

  Mesh mesh_;
  PartitionSpec spec_;
  std::vector<std::string> partial_axes_;
  ShardingMode mode_;
  // Mesh axis indices for each spec entry and for partial_axes_, resolved
  // once by Create.
  std::vector<std::vector<int>> dim_axes_;
  std::vector<int> partial_axis_indices_;
};

}  // namespace placement

#endif  // PLACEMENT_COMMON_SHARDING_H_
