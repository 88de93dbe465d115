// Process-local data geometry for a multi-controller cluster: which part of a
// global array each process ("host", index 0..P-1) holds, and where each of
// its device shards lies in the process's own buffer. This is the geometry of
// JAX's jax.make_array_from_process_local_data, reproduced exactly (checked
// against JAX by tests/common/process_local_conformance_test.cc), plus the
// global-shape rule of loadax's host_to_global_device_array.
//
// Device ids are global and each device belongs to exactly one process; the
// caller says which through a ProcessOfDevice callback, and names the calling
// process. Nothing here touches devices or the network.
//
// Worked example (JAX's local_to_global_shape docstring). Mesh(a=2, b=2, c=2)
// over device ids 0..7 (row-major, so device p has coordinates
// (p / 4, p / 2 % 2, p % 2)); 4 processes with 2 devices each, process of
// device d = d / 2 (the two devices of a process differ only on 'c'). For
// process-local data of shape [L0, L1]:
//
//   P()                   global [L0, L1]: every process holds everything.
//   P(('a','b','c'))      global [4*L0, L1]; each device holds L0/2 rows.
//   P(('a','b'))          global [4*L0, L1]: 'c' splits nothing across
//                         processes, so each device holds all L0 rows.
//   P(None, ('a','c'))    global [L0, 2*L1]; each device holds L1/2 columns.
//   P(('a','c'), 'b')     global [2*L0, 2*L1]; each device holds L0/2 rows.
//
// With P(('a','c'), 'b') and local data [4, 6], process 1 (devices 2, 3 at
// (0,1,0) and (0,1,1)): global shape [8, 12]; device 2 holds rows [0, 2) and
// columns [6, 12) of the global array, device 3 rows [2, 4) and the same
// columns. ProcessLocalLayout maps them to rows [0, 2) and [2, 4), all 6
// columns, of the local data: along a dimension where the local size differs
// from the global one, a shard's local position is the rank of its start
// among the distinct starts of this process's shards, times the shard extent;
// along a dimension where they agree the local data is the whole dimension.
//
// "Non-uniform" shardings (JAX's term) are those where, along a dimension,
// processes hold different numbers of distinct slices, or overlapping but
// unequal sets of slices (for instance when the mesh's devices are permuted
// across processes). Along such a dimension the global size cannot be
// inferred from the local one (LocalToGlobalShape answers nullopt, JAX's
// None) and the local data must span the whole global dimension.
//
// Differences from JAX, all deliberate:
//   * JAX numbers a dimension's distinct per-process slice sets in the
//     iteration order of a Python set (hash order: for P('x') over two
//     processes it gives process 0 index 1). ProcessIndexAndCount numbers them
//     by their smallest slice start, as JAX's docstring describes; the count
//     and which processes share an index are JAX's.
//   * A spec longer than the rank is INVALID_ARGUMENT (NamedSharding's rank
//     error) wherever an index map is needed; JAX's process-local path does
//     not check it (a trailing None passes, a sharded extra entry raises
//     IndexError). A fully replicated sharding still answers {0, 1} first.
//   * Partial axes of size > 1 are INVALID_ARGUMENT: per-process data of a
//     partial sum is not defined here. kPadded shardings are handled as kEven
//     (JAX's only mode): a global dimension that does not divide by its shard
//     count is INVALID_ARGUMENT.
//
// Error codes, for every function below: INVALID_ARGUMENT for bad arguments
// (a negative process index or dimension, a device whose process is < 0, a
// dim outside [0, rank), a spec longer than the rank, partial axes, an
// indivisible global shape, and the JAX messages quoted below);
// FAILED_PRECONDITION when the calling process holds no device of the
// sharding and the answer needs one (JAX fails there with StopIteration).
// A non-uniform dimension is INVALID_ARGUMENT that IsNonUniformShardingError
// recognises (JAX's NonUniformShardingError).
//
// All functions are pure and thread-safe; they call process_of once per mesh
// device and cost O(num_devices * rank) plus sorting.
#ifndef PLACEMENT_COMMON_PROCESS_LOCAL_H_
#define PLACEMENT_COMMON_PROCESS_LOCAL_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/region.h"
#include "common/shape.h"
#include "common/sharding.h"

namespace placement {

// The process (>= 0) that owns a device. Called only with device ids of the
// sharding's mesh; a negative answer is INVALID_ARGUMENT.
using ProcessOfDevice = absl::FunctionRef<int32_t(int64_t device_id)>;

// Which of `count` distinct per-process slice sets along one dimension the
// calling process holds; processes with equal index hold the same slices.
struct ProcessIndexCount {
  int64_t index = 0;
  int64_t count = 1;

  bool operator==(const ProcessIndexCount&) const = default;
};

// JAX's get_process_index_and_count(sharding, dim, rank) for `process`.
// {0, 1} when every mesh device is on `process` or the sharding is fully
// replicated. Otherwise, over JAX's universal shape (num_devices,) * rank:
// each process's set of distinct slices along `dim`; every process must hold
// as many slices as `process` and the distinct sets must partition all
// slices, else the non-uniform error; index = position of this process's set
// among the distinct sets ordered by smallest start.
// Example: Mesh(r=2, c=4) over devices 0..7, P('r', 'c'), processes
// {0,5}, {1,4}, {2,7}, {3,6} ("1234 / 2143" in JAX's docstring): along dim 0
// every process gets {index 0, count 1} (all hold both rows); along dim 1
// processes 0 and 1 (columns 0 and 1) get {0, 2}, processes 2 and 3 {1, 2}.
absl::StatusOr<ProcessIndexCount> ProcessIndexAndCount(const NamedSharding& sharding, int dim,
                                                       int rank, ProcessOfDevice process_of,
                                                       int32_t process);

// True for the error ProcessIndexAndCount returns for a non-uniform dimension.
bool IsNonUniformShardingError(const absl::Status& status);

// Per dimension a size, or nullopt where it is unknown (JAX's None).
using PartialShape = std::vector<std::optional<int64_t>>;

// JAX's local_to_global_shape: per dimension local_shape[d] * count of
// ProcessIndexAndCount(d), or nullopt where that dimension is non-uniform.
// Other errors of ProcessIndexAndCount are returned; a negative local
// dimension or a product over int64 is INVALID_ARGUMENT.
absl::StatusOr<PartialShape> LocalToGlobalShape(const NamedSharding& sharding,
                                                absl::Span<const int64_t> local_shape,
                                                ProcessOfDevice process_of, int32_t process);

// LocalToGlobalShape, with JAX's INVALID_ARGUMENT when a dimension is unknown:
// "Unable to compute global_shape due to non-uniform sharding. Specify global
// shape directly. Partially computed global_shape=(None, 4)."
absl::StatusOr<Shape> InferGlobalShape(const NamedSharding& sharding,
                                       absl::Span<const int64_t> local_shape,
                                       ProcessOfDevice process_of, int32_t process);

// JAX's num_addressable_indices: how many indices along `dim` the devices of
// `process` hold, counting shared slices once = shard extent x number of
// distinct slices. 0 when the process holds no device of the sharding.
// INVALID_ARGUMENT when `global_shape` does not suit the sharding.
// Example: Mesh(r=3, c=4) over devices 0..11 with processes "1221 / 1221 /
// 0000", P('r', 'c'), global [3, 4]: process 1 addresses 2 rows and 2
// columns, process 0 1 row and 4 columns.
absl::StatusOr<int64_t> NumAddressableIndices(const NamedSharding& sharding, int dim,
                                              absl::Span<const int64_t> global_shape,
                                              ProcessOfDevice process_of, int32_t process);

// One device shard of the calling process.
struct ProcessLocalShard {
  int64_t device_id = 0;
  int64_t mesh_position = 0;
  // What the device holds, in global coordinates.
  Box global_box;
  // Where those elements lie in the process-local data (same extents).
  Box local_box;

  bool operator==(const ProcessLocalShard&) const = default;
};

struct LocalDataLayout {
  Shape global_shape;
  Shape local_shape;
  // The shards of the devices on the calling process, in row-major mesh order.
  std::vector<ProcessLocalShard> shards;

  bool operator==(const LocalDataLayout&) const = default;
};

// JAX's _array_from_process_local_data geometry: where each device shard of
// `process` comes from in process-local data of `local_shape`.
// The global shape is `global_shape` when given, else InferGlobalShape (and
// its errors). Each dimension of the local data must equal the global one or
// NumAddressableIndices for it, else INVALID_ARGUMENT with JAX's message:
// "Invalid host data, each dimension should match either global or process
// shape. In dimension 1, the process data has 3 elements. Process addresses 2
// elements and global_shape=(8, 4)."
// Also INVALID_ARGUMENT: `global_shape` of another rank than `local_shape`
// (the message names both); a negative dimension; a global shape the sharding
// does not divide. FAILED_PRECONDITION: `process` holds no device of the
// sharding.
// Example: see the file comment (P(('a','c'), 'b'), local [4, 6], process 1).
absl::StatusOr<LocalDataLayout> ProcessLocalLayout(
    const NamedSharding& sharding, std::optional<absl::Span<const int64_t>> global_shape,
    absl::Span<const int64_t> local_shape, ProcessOfDevice process_of, int32_t process);

// loadax DataPartitionType (host_to_global_device_array): kFull splits
// dimension 0 over all mesh axes, kReplicated replicates.
enum class ProcessDataPartition { kFull, kReplicated };

// loadax host_to_global_device_array's global shape for per-process data of
// `local_shape`: kFull -> [local_shape[0] * num_processes, ...], kReplicated ->
// unchanged. INVALID_ARGUMENT (loadax's text) when, for kFull,
// local_shape[0] does not divide by local_device_count: "([10,3]) cannot be
// sharded across 8 devices."; also INVALID_ARGUMENT for kFull on a rank-0
// shape, a negative dimension, num_processes or local_device_count < 1, an
// int64 overflow, and a partition that is not an enum value
// ("Unsupported partition: 7").
absl::StatusOr<Shape> LoadaxGlobalShape(ProcessDataPartition partition,
                                        absl::Span<const int64_t> local_shape,
                                        int64_t num_processes, int64_t local_device_count);

}  // namespace placement

#endif  // PLACEMENT_COMMON_PROCESS_LOCAL_H_
