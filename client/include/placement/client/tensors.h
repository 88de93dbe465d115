// TensorClient: typed calls of placement.v1.TensorService -- upload,
// download, describe, list, delete, place/reshard, assemble/disassemble of
// tensors held by the daemon (JAX device_put, NamedSharding,
// make_array_from_single_device_arrays).
//
//   TensorClient tensors(*client);
//   std::vector<float> x(32 * 128);
//   auto info = tensors.Upload(HostArray::Of<float>(x, {32, 128}),
//                              Placement::Sharded(mesh, {{"data"}}));
//   auto moved = tensors.Place(info->id, Placement::Replicated(mesh));
//   std::vector<float> back(x.size());
//   tensors.Download(info->id, AsWritableBytes(back));
//
// Bytes are row-major, little-endian, unpadded. Uploads and downloads stream
// in chunks (default 1 MiB) straight from / into the caller's memory: host
// memory stays O(chunk) whatever the tensor size, and the caller's buffer is
// never copied whole. For data larger than memory, use StartUpload (an
// Uploader fed piece by piece) or UploadFrom (a ByteReader callback), and the
// callback form of Download.
//
// Every call keeps the daemon's gRPC code and message. Checks made here,
// before any bytes move, use the same codes (INVALID_ARGUMENT "expected 4096
// bytes for f32[32,32], got 4000").
//
// TensorClient holds a reference to the Client, which must outlive it; it
// is thread-safe. An Uploader is used by one thread at a time.
#ifndef PLACEMENT_CLIENT_TENSORS_H_
#define PLACEMENT_CLIENT_TENSORS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "placement/client/client.h"
#include "placement/client/regions.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_info.h"
#include "placement/client/types.h"
#include "placement/client/views.h"

namespace placement::client {

inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;

// Bytes per element of `dtype` (bool is 1); 0 for kUnspecified or unknown
// values.
int64_t ElementSize(DType dtype);
// ElementSize x elements. INVALID_ARGUMENT for an unknown dtype, negative
// dimensions, or a size that overflows int64.
absl::StatusOr<int64_t> ExpectedBytes(DType dtype, absl::Span<const int64_t> shape);
// "f32[32,32]".
std::string DescribeArray(DType dtype, absl::Span<const int64_t> shape);

// The dtype of a C++ element type: float, double, int8..int64, uint8, bool.
template <typename T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int8_t>) return DType::kI8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::kI16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::kU8;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  return DType::kUnspecified;
}

template <typename T>
absl::Span<const uint8_t> AsBytes(absl::Span<const T> values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(T)};
}
template <typename T>
absl::Span<uint8_t> AsWritableBytes(absl::Span<T> values) {
  return {reinterpret_cast<uint8_t*>(values.data()), values.size() * sizeof(T)};
}
template <typename T>
absl::Span<uint8_t> AsWritableBytes(std::vector<T>& values) {
  return AsWritableBytes(absl::MakeSpan(values));
}

// A host array the caller owns: dtype, shape and a view of its bytes
// (row-major, little-endian). The bytes must stay valid during the call.
struct HostArray {
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;
  absl::Span<const uint8_t> data;

  template <typename T>
  static HostArray Of(absl::Span<const T> values, std::vector<int64_t> shape) {
    static_assert(DTypeOf<T>() != DType::kUnspecified,
                  "use HostArray{dtype, shape, bytes} for f16/bf16");
    return HostArray{DTypeOf<T>(), std::move(shape), AsBytes(values)};
  }
  template <typename T>
  static HostArray Of(const std::vector<T>& values, std::vector<int64_t> shape) {
    return Of(absl::MakeConstSpan(values), std::move(shape));
  }
};

// One array of an UploadBatch group (a pytree dict entry).
struct BatchArray {
  std::string key;
  HostArray array;
};

// Told as a transfer moves: the tensor bytes done so far and in all. Called
// on the calling thread after each chunk (or piece of a same-host region
// transfer; a region transfer may report only its end; a transfer written
// or read in place after every 64 MiB it copied), with `done` never
// decreasing and reaching `total` exactly once, when the transfer is
// complete. It must be quick: a progress bar redraws at most a few times a
// second itself. (placectl's progress bar and Python's progress= use it.)
using ProgressFn = std::function<void(int64_t done, int64_t total)>;

// A multi-controller upload (JAX make_array_from_process_local_data, loadax
// host_to_global_device_array on several nodes): every process's trainer
// uploads its host-local part to its own daemon under the same
// `global_name` and the same rule over a cluster-wide mesh. The array (or
// batch) given is this process's LOCAL part; the tensor commits, with one
// id cluster-wide, once every process holding devices of the sharding has
// contributed (a barrier through the coordinator), and no bytes cross nodes.
// Each call returns the global tensor. The rule must be a sharding
// (Placement::Sharded), a replicated mesh (Placement::Replicated) or a
// Rule::DataPartition. See docs/cluster.md.
struct ProcessLocal {
  // Shared by every process's call; 1..256 bytes. The tensor is named
  // `global_name`, a batch's arrays "<global_name>/<key>".
  std::string global_name;
  // Empty: inferred as JAX does (local_to_global_shape; a data partition:
  // local rows x processes for kFull). Else each dimension equals the local
  // one or the process's addressable extent. For a batch it applies to every
  // array, so leave it empty unless all arrays share one global shape.
  std::vector<int64_t> global_shape;
  // How long this call waits for the other processes; zero = the daemon's
  // default (60 s). On timeout: DEADLINE_EXCEEDED naming the missing
  // processes, and nothing is kept anywhere.
  absl::Duration timeout = absl::ZeroDuration();

  bool operator==(const ProcessLocal&) const = default;
};

struct UploadOptions {
  std::string name;   // optional tensor name (groups: "<name>/<key>")
  std::string owner;  // for quotas and listing
  int64_t chunk_bytes = kDefaultChunkBytes;
  // Deadline for the whole stream; infinite = none.
  absl::Duration timeout = absl::InfiniteDuration();
  // kAuto: when the daemon is on this host (regions.h), Upload writes arrays
  // of 1 MiB or more straight into its memory where it can (kInPlace), and
  // other transfers of 256 KiB or more go through a staging region;
  // kStream / kRegion / kInPlace force a path.
  TransferPath path = TransferPath::kAuto;
  // Set: a multi-controller upload of this process's part (above); `name`
  // must then be empty (the tensor is named by global_name).
  // INVALID_ARGUMENT before any byte moves for an empty or over-long
  // global_name, a negative global_shape dimension or timeout.
  std::optional<ProcessLocal> process_local;
  // Progress of Upload, UploadFrom, StartUpload's Uploader and UploadBatch
  // (over all its arrays); null = none.
  ProgressFn progress;
};

struct DownloadOptions {
  int64_t chunk_bytes = 0;  // 0 = the daemon's 1 MiB; at most 4 MiB
  absl::Duration timeout = absl::InfiniteDuration();
  // As UploadOptions::path; applies to downloads into caller memory.
  TransferPath path = TransferPath::kAuto;
  // Progress of the download (total: the selection's bytes); null = none.
  ProgressFn progress;
};

// Which part of a tensor a Download returns.
class DownloadSelection {
 public:
  // The whole array in row-major order (the default).
  static DownloadSelection Whole() { return DownloadSelection(); }
  // That device's shard, in the shard's own row-major order.
  static DownloadSelection Device(int64_t device_id);
  // The distinct shards these devices hold, one after another in the order
  // of the header's `pieces`.
  static DownloadSelection Devices(std::vector<int64_t> device_ids);
  // The distinct shards addressable by node `process_index`.
  static DownloadSelection Process(int32_t process_index);

  enum class Kind { kWhole, kDevice, kDevices, kProcess };
  Kind kind() const { return kind_; }
  int64_t device_id() const { return device_id_; }                        // kDevice
  const std::vector<int64_t>& device_ids() const { return device_ids_; }  // kDevices
  int32_t process_index() const { return process_index_; }                // kProcess

 private:
  Kind kind_ = Kind::kWhole;
  int64_t device_id_ = 0;
  std::vector<int64_t> device_ids_;
  int32_t process_index_ = 0;
};

// Fills up to buffer.size() bytes and returns how many; 0 means no more data.
using ByteReader = std::function<absl::StatusOr<size_t>(absl::Span<uint8_t> buffer)>;
// Receives consecutive pieces of a download; a non-OK status cancels it.
using ChunkSink = std::function<absl::Status(absl::Span<const uint8_t> chunk)>;
using HeaderSink = std::function<absl::Status(const DownloadHeader& header)>;

// An upload in progress: the header is sent when it starts; bytes follow in
// any pieces and leave in chunk_bytes messages, never held whole.
// Destroying an unfinished Uploader cancels it (the daemon keeps nothing).
class Uploader {
 public:
  ~Uploader();
  Uploader(const Uploader&) = delete;
  Uploader& operator=(const Uploader&) = delete;

  // INVALID_ARGUMENT (and the upload is cancelled) when the bytes written so
  // far would exceed total_bytes(); the daemon's status when the stream broke.
  absl::Status Write(absl::Span<const uint8_t> bytes);
  // Pulls from `reader` until total_bytes() are written or it returns 0.
  absl::Status WriteFrom(const ByteReader& reader);
  // Sends the last chunk and waits for the daemon. INVALID_ARGUMENT (and the
  // upload is cancelled) when fewer than total_bytes() were written.
  absl::StatusOr<TensorInfo> Finish();
  // Abandons the upload; later calls return CANCELLED.
  void Cancel();

  int64_t total_bytes() const;
  int64_t bytes_written() const;

 private:
  friend class TensorClient;
  struct Impl;
  explicit Uploader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

struct DownloadedBytes {
  DownloadHeader header;
  std::vector<uint8_t> bytes;
};

class TensorClient {
 public:
  explicit TensorClient(const Client& client) : client_(client) {}

  // --- Upload ------------------------------------------------------------------
  // INVALID_ARGUMENT when array.data is not exactly the array's byte size;
  // otherwise the daemon's codes (NOT_FOUND unknown mesh/device,
  // RESOURCE_EXHAUSTED device budget, INVALID_ARGUMENT bad spec).
  absl::StatusOr<TensorInfo> Upload(const HostArray& array, const Rule& rule = {},
                                    const UploadOptions& options = {}) const;
  absl::StatusOr<std::unique_ptr<Uploader>> StartUpload(DType dtype, std::vector<int64_t> shape,
                                                        const Rule& rule = {},
                                                        const UploadOptions& options = {}) const;
  // Streams exactly the array's byte size from `reader`.
  absl::StatusOr<TensorInfo> UploadFrom(DType dtype, std::vector<int64_t> shape,
                                        const ByteReader& reader, const Rule& rule = {},
                                        const UploadOptions& options = {}) const;
  // A named group under one rule, all or nothing. Results in `arrays` order.
  absl::StatusOr<std::vector<NamedTensor>> UploadBatch(const std::vector<BatchArray>& arrays,
                                                       const Rule& rule = {},
                                                       const UploadOptions& options = {}) const;

  // --- Download ----------------------------------------------------------------
  // Writes header.total_bytes bytes at the start of `out`. INVALID_ARGUMENT
  // (nothing more is received) when `out` is smaller.
  absl::StatusOr<DownloadHeader> Download(
      const std::string& tensor_id, absl::Span<uint8_t> out,
      const DownloadSelection& selection = DownloadSelection::Whole(),
      const DownloadOptions& options = {}) const;
  // Calls `on_header` once, then `on_chunk` for consecutive pieces. A non-OK
  // status from either cancels the stream and is returned.
  absl::StatusOr<DownloadHeader> Download(
      const std::string& tensor_id, const HeaderSink& on_header, const ChunkSink& on_chunk,
      const DownloadSelection& selection = DownloadSelection::Whole(),
      const DownloadOptions& options = {}) const;
  absl::StatusOr<DownloadedBytes> DownloadBytes(
      const std::string& tensor_id, const DownloadSelection& selection = DownloadSelection::Whole(),
      const DownloadOptions& options = {}) const;

  // --- Same-host regions (regions.h) --------------------------------------------
  // Uploads the ExpectedBytes(dtype, shape) bytes at `offset` in `region`:
  // the daemon copies them straight into the shards (no copy here).
  // OUT_OF_RANGE when they do not fit the region.
  absl::StatusOr<TensorInfo> UploadFromRegion(const SharedRegion& region, int64_t offset,
                                              DType dtype, std::vector<int64_t> shape,
                                              const Rule& rule = {},
                                              const UploadOptions& options = {}) const;
  // Has the daemon write the selection's bytes into `region` at `offset`
  // (no copy here); returns the header. OUT_OF_RANGE when they do not fit.
  absl::StatusOr<DownloadHeader> DownloadToRegion(
      const std::string& tensor_id, const SharedRegion& region, int64_t offset,
      const DownloadSelection& selection = DownloadSelection::Whole(),
      const DownloadOptions& options = {}) const;

  // --- Same-host views (views.h) -------------------------------------------------
  // A zero-copy, read-only view of the tensor's shards in the daemon's own
  // memory (TensorView::Open): no bytes move. FAILED_PRECONDITION for a
  // daemon on another host.
  absl::StatusOr<std::unique_ptr<TensorView>> View(const std::string& tensor_id,
                                                   const ViewOptions& options = {}) const;

  // --- Metadata and lifetime ---------------------------------------------------
  // Every call that takes a tensor id also takes its name, when exactly one
  // tensor of the caller's tenant carries it (the daemon resolves it;
  // FAILED_PRECONDITION listing the ids when several do). See
  // docs/api/tensors.md "Names".
  absl::StatusOr<TensorInfo> Describe(const std::string& tensor_id) const;
  absl::StatusOr<std::vector<TensorInfo>> List(const std::string& name_prefix = "",
                                               const std::string& mesh_id = "") const;
  // Frees device memory at once; all or nothing (NOT_FOUND names the first
  // unknown id). Returns the device bytes freed.
  absl::StatusOr<int64_t> Delete(const std::vector<std::string>& tensor_ids) const;
  // Takes the tensors out of every session (the client's own included), so
  // that they stay after the client goes, until deleted (SessionService
  // PersistTensors). All or nothing; NOT_FOUND names the first unknown id.
  absl::Status Persist(const std::vector<std::string>& tensor_ids) const;

  // --- Placement -----------------------------------------------------------------
  // device_put of existing tensors under `rule`; results in request order.
  // On failure the sources are intact and nothing new is kept.
  absl::StatusOr<std::vector<TensorInfo>> Place(const std::vector<std::string>& tensor_ids,
                                                const Rule& rule,
                                                SourceHandling source = SourceHandling::kKeep,
                                                const std::string& name = "") const;
  absl::StatusOr<TensorInfo> Place(const std::string& tensor_id, const Rule& rule,
                                   SourceHandling source = SourceHandling::kKeep,
                                   const std::string& name = "") const;
  // make_array_from_single_device_arrays(shape, sharding, arrays): one
  // single-device tensor per device of `placement`, shaped like its shard.
  absl::StatusOr<TensorInfo> Assemble(const std::vector<int64_t>& shape, const Placement& placement,
                                      const std::vector<std::string>& tensor_ids,
                                      SourceHandling source = SourceHandling::kKeep,
                                      const std::string& name = "") const;
  // One single-device tensor per shard, in mesh device order.
  absl::StatusOr<std::vector<TensorInfo>> Disassemble(
      const std::string& tensor_id, SourceHandling source = SourceHandling::kKeep) const;

 private:
  const Client& client_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_TENSORS_H_
