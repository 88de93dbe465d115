// Value types of the client API: what the daemon reports about devices,
// meshes, shardings and itself, as plain C++ (no generated protobuf or gRPC
// types). The library converts the wire messages into these in
// client/src/convert.cc, so a change of the .proto files is not a source
// change for programs that use the client.
//
// All types here are passive values (public fields, copyable, comparable);
// thread-compatible. Enum values match the wire enums of
// proto/placement/v1/types.proto, and a value a newer daemon sends that
// this library does not know becomes the enum's "unknown" entry.
#ifndef PLACEMENT_CLIENT_TYPES_H_
#define PLACEMENT_CLIENT_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace placement::client {

// Element types of tensors. kUnspecified is never valid in a request.
enum class DType : int {
  kUnspecified = 0,
  kF32 = 1,
  kF64 = 2,
  kF16 = 3,
  kBF16 = 4,
  kI8 = 5,
  kI16 = 6,
  kI32 = 7,
  kI64 = 8,
  kU8 = 9,
  kBool = 10,
};

// "f32", "f64", "f16", "bf16", "i8", "i16", "i32", "i64", "u8", "bool";
// "unspecified" for kUnspecified and unknown values.
absl::string_view DTypeName(DType dtype);
// Inverse of DTypeName; also accepts numpy names ("float32", "int64", ...).
// INVALID_ARGUMENT naming the accepted values otherwise.
absl::StatusOr<DType> ParseDType(absl::string_view name);

// The seed's HardwareType (artifex DevicePlacement), plus H200 and B200.
enum class HardwareType : int {
  kTpuV5e = 1,
  kTpuV5p = 2,
  kTpuV4 = 3,
  kH100 = 4,
  kA100 = 5,
  kV100 = 6,
  kCpu = 7,
  kUnknown = 8,
  kH200 = 9,
  kB200 = 10,
};

// The seed's string value: "tpu_v5e", "tpu_v5p", "tpu_v4", "h100", "a100",
// "v100", "cpu", "unknown", plus "h200", "b200".
absl::string_view HardwareTypeName(HardwareType type);
// Inverse of HardwareTypeName, case-insensitive; also accepts "H100" and
// "HARDWARE_TYPE_H100". INVALID_ARGUMENT naming every accepted value.
absl::StatusOr<HardwareType> ParseHardwareType(absl::string_view name);

// Reductions of collectives and of partial shardings (DTensor Partial).
// kUnspecified in a request means "the tensor's partial op, else sum".
enum class ReduceOp : int {
  kUnspecified = 0,
  kSum = 1,
  kMean = 2,
  kMax = 3,
  kMin = 4,
  kProd = 5,
};

// "sum", "mean", "max", "min", "prod"; "unspecified" otherwise. (The
// collectives also take these names as strings; the daemon parses them.)
absl::string_view ReduceOpName(ReduceOp op);
// Inverse of ReduceOpName, case-insensitive. INVALID_ARGUMENT in the daemon's
// words otherwise: "Unsupported reduce_type: avg. Use 'sum', 'mean', 'max',
// 'min' or 'prod'."
absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name);

// How a dimension that does not divide by its shard count is handled.
enum class ShardingMode : int {
  kEven = 1,    // INVALID_ARGUMENT, as in JAX (the default)
  kPadded = 2,  // ceil-sized blocks, trailing shards short or empty
};

// loadax DataPartitionType.
enum class DataPartition : int {
  kFull = 1,        // dimension 0 over the product of all mesh axes
  kReplicated = 2,  // every device holds the whole array
};

// "full" / "replicated".
absl::string_view DataPartitionName(DataPartition partition);

// Who drives an operation on a tensor whose shards live on several daemons
// of a cluster (docs/cluster.md). On a lone daemon both mean the same.
enum class Controller : int {
  // This call alone drives every daemon that holds shards (bytes move
  // between daemons as needed). The default.
  kSingle = 1,
  // JAX multi-controller: every process's trainer makes the same call on its
  // own daemon; the calls meet and run once, together.
  kMulti = 2,
};

// "single" / "multi".
absl::string_view ControllerName(Controller controller);
// Inverse of ControllerName, case-insensitive. INVALID_ARGUMENT "unknown
// controller 'x'; accepted values: single, multi" otherwise.
absl::StatusOr<Controller> ParseController(absl::string_view name);

// What MeshClient::Delete does with the tensors that use the mesh.
enum class TensorsOnMesh {
  kRefuse,  // FAILED_PRECONDITION while any tensor uses the mesh (the default)
  kDelete,  // delete them with the mesh
};

// Whether validate_batch_size reports a batch between the seed's minimum and
// critical sizes as suboptimal (the seed's warn_suboptimal=True / False).
enum class SuboptimalWarning {
  kWarn,    // "Batch size 20 is below critical size 64 for cpu. ..." (the default)
  kSilent,  // such a batch is "acceptable"
};

// What happens to the source tensors of Place / Assemble / Disassemble and
// of the collectives.
enum class SourceHandling {
  kKeep,    // sources stay (JAX device_put copies)
  kDonate,  // sources are deleted once the results exist
};

// One device of the daemon (ListDevices).
struct Device {
  int64_t id = 0;             // global id
  int32_t process_index = 0;  // node
  int32_t local_index = 0;    // index on its node
  std::string platform;       // "cpu" or "gpu"
  std::string device_kind;    // "NVIDIA H100 80GB HBM3", "cpu"
  HardwareType hardware_type = HardwareType::kUnknown;
  int64_t memory_total_bytes = 0;
  int64_t memory_in_use_bytes = 0;  // bytes the daemon holds on it
  int64_t memory_limit_bytes = 0;   // budget the daemon may use
  // Freed blocks the daemon keeps for reuse; they count against the budget.
  int64_t memory_cached_bytes = 0;
  // What the buffers in use cost against the budget (blocks + host overhead).
  int64_t memory_charged_bytes = 0;
  std::string compute_capability;  // "9.0" (GPUs)
  std::string pci_bus_id;
  int32_t numa_node = 0;
  int32_t multiprocessor_count = 0;

  bool operator==(const Device&) const = default;
};

// get_device_info(): the seed's dict as a struct.
struct DeviceInfo {
  struct Summary {
    int64_t id = 0;
    std::string platform;
    std::string device_kind;
    bool operator==(const Summary&) const = default;
  };
  int64_t num_devices = 0;
  HardwareType hardware_type = HardwareType::kUnknown;  // of the first device
  std::vector<std::string> platforms;                   // unique, first-seen order
  std::vector<std::string> device_kinds;                // unique, non-empty, first-seen order
  std::vector<Summary> devices;                         // device order

  bool operator==(const DeviceInfo&) const = default;
};

// Peak dense FLOP/s over memory bytes/s: the batch at which a matmul-bound
// step stops being bandwidth-bound.
struct Roofline {
  double peak_flops_per_second = 0;
  double memory_bytes_per_second = 0;
  double critical_batch_size = 0;
  std::string source;  // what the two numbers describe

  bool operator==(const Roofline&) const = default;
};

// The seed's BatchSizeRecommendation, plus our roofline figure.
struct BatchSizeRecommendation {
  HardwareType hardware_type = HardwareType::kUnknown;
  int64_t min_batch_size = 0;
  int64_t optimal_batch_size = 0;
  int64_t critical_batch_size = 0;
  std::optional<int64_t> max_memory_batch_size;  // unset in every seed row
  std::string notes;
  std::optional<Roofline> roofline;  // where the hardware is known

  bool operator==(const BatchSizeRecommendation&) const = default;
};

// validate_batch_size: the seed's (valid, message), and extra advice.
struct BatchSizeValidation {
  bool valid = false;
  std::string message;                                  // exactly the seed's text
  std::vector<std::string> warnings;                    // e.g. not divisible by the device count
  HardwareType hardware_type = HardwareType::kUnknown;  // the row used

  bool operator==(const BatchSizeValidation&) const = default;
};

// The daemon's own state (DaemonService.GetStatus).
// A cluster's membership as a daemon reports it (docs/cluster.md).
enum class ClusterState { kUnspecified, kSingle, kForming, kFormed, kDegraded, kFailed };
enum class ProcessState { kUnspecified, kJoining, kAlive, kLost, kLeft };

struct ProcessStatus {
  int32_t process_index = 0;
  ProcessState state = ProcessState::kUnspecified;
  std::string peer_address;
  int64_t num_devices = 0;
  int64_t first_device_id = 0;
  int32_t joins = 0;  // restarts + 1
  bool operator==(const ProcessStatus&) const = default;
};

struct ClusterStatus {
  ClusterState state = ClusterState::kUnspecified;  // kSingle for a lone daemon
  int64_t epoch = 0;                                // advances on every membership change
  int32_t num_processes = 1;
  std::string coordinator_address;
  std::string peer_address;  // this daemon's
  std::vector<ProcessStatus> processes;
  bool operator==(const ClusterStatus&) const = default;
};

// "single", "forming", "formed", "degraded", "failed"; "joining", "alive", "lost", "left".
std::string ClusterStateName(ClusterState state);
std::string ProcessStateName(ProcessState state);

struct DaemonStatus {
  std::string version;
  std::string backend;       // "cpu" or "cuda"
  std::string backend_note;  // e.g. why "auto" fell back to cpu
  std::string instance_id;   // random per process start
  absl::Duration uptime;
  absl::Time start_time;
  std::string listen_address;
  int64_t num_devices = 0;
  int64_t num_meshes = 0;
  int64_t num_tensors = 0;
  int64_t device_bytes_in_use = 0;
  int64_t num_prefetch_streams = 0;  // prefetch streams open now
  bool serving = false;              // false while draining
  int32_t process_index = 0;
  // Same-host regions (regions.h): the daemon's machine and boot, its
  // fd-passing socket ("" = regions off) and the regions registered now.
  std::string host_id;
  std::string boot_id;
  std::string region_socket;
  int64_t num_regions = 0;
  ClusterStatus cluster;
};

// One named mesh axis.
struct MeshAxis {
  std::string name;
  int64_t size = 0;
  bool operator==(const MeshAxis&) const = default;
};

// Ordered axes, major to minor: the seed's dict and list forms of
// create_device_mesh both map to this ({{"data", 2}, {"model", 4}}).
using MeshAxes = std::vector<MeshAxis>;

// A mesh registered with the daemon (JAX Mesh).
struct Mesh {
  std::string id;
  MeshAxes axes;
  std::vector<int64_t> device_ids;  // row-major over `axes`
  int64_t total_devices = 0;
  int64_t tensor_count = 0;  // tensors using the mesh when it was read

  bool operator==(const Mesh&) const = default;
};

// PartitionSpec entries: per leading tensor dimension, the mesh axes that
// shard it, first listed most significant; an empty entry is None.
// {{"data"}, {}} is P('data', None) and {{"x", "y"}} is P(('x', 'y')).
using Spec = std::vector<std::vector<std::string>>;

// A resolved NamedSharding: mesh + spec, optional partial axes (DTensor
// Partial: devices differing on them hold summands combined with
// partial_op), and the divisibility mode.
struct Sharding {
  std::string mesh_id;
  Spec spec;
  std::vector<std::string> partial_axes;
  ReduceOp partial_op = ReduceOp::kUnspecified;
  ShardingMode mode = ShardingMode::kEven;

  bool operator==(const Sharding&) const = default;
};

// [begin, end) along one dimension, in global coordinates.
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  bool operator==(const IndexRange&) const = default;
};

// What one device holds of a tensor (JAX devices_indices_map).
struct ShardInfo {
  int64_t device_id = 0;
  std::vector<IndexRange> ranges;  // per dimension
  std::vector<int64_t> shape;      // extents of `ranges`
  int64_t replica_id = 0;          // earlier devices holding the same box
  int64_t size_bytes = 0;
  int32_t process_index = 0;  // the daemon (node) holding it

  bool operator==(const ShardInfo&) const = default;
};

// What a Download returns before its bytes.
struct DownloadHeader {
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;  // of the returned data (whole array or one shard)
  int64_t total_bytes = 0;
  // Device-set and process selections: the shards, in the order their bytes
  // follow one another.
  std::vector<ShardInfo> pieces;

  bool operator==(const DownloadHeader&) const = default;
};

// A long-lived stream open on the daemon (Client::ListStreams; what
// `placectl top` shows).
enum class StreamKind { kUnspecified, kUpload, kUploadBatch, kDownload, kPrefetch };

// "upload", "upload_batch", "download", "prefetch" ("unspecified").
absl::string_view StreamKindName(StreamKind kind);

struct StreamStatus {
  int64_t id = 0;  // per daemon run, in open order
  StreamKind kind = StreamKind::kUnspecified;
  std::string tenant;
  std::string what;         // "weights/w1 f32[1024,1024]", "batch 2 arrays", a prefetch name
  int64_t bytes = 0;        // tensor bytes moved so far
  int64_t total_bytes = 0;  // 0 = not known
  absl::Time opened;

  bool operator==(const StreamStatus&) const = default;
};

// What DaemonService.TrimMemory gave back (Client::TrimMemory).
struct MemoryTrim {
  int64_t cache_bytes_released = 0;   // cached device blocks freed
  int64_t resident_bytes_before = 0;  // the daemon's RSS before and after
  int64_t resident_bytes_after = 0;

  bool operator==(const MemoryTrim&) const = default;
};

// The daemon's figures for a finished prefetch stream.
struct PrefetchStats {
  int64_t batches_staged = 0;
  int64_t bytes_staged = 0;
  absl::Duration consumer_stall;    // the consumer waiting for a ready batch
  absl::Duration producer_blocked;  // the daemon waiting for a free slot
  int64_t max_batches_held = 0;

  bool operator==(const PrefetchStats&) const = default;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_TYPES_H_
