// Zero-copy shard views (placement.v1.ViewService, docs/api/views.md): a
// trainer on the daemon's host reads the shards the daemon holds in place,
// without downloading them -- Ray's zero-copy numpy reads, PyTorch's CUDA
// IPC.
//
//   TensorClient tensors(*client);
//   auto view = tensors.View(info->id);               // one RPC, one socket hop
//   std::span<const std::byte> shard0 = (*view)->bytes(0);   // read in place
//
// A TensorView owns an export: while it lives, the daemon keeps the shards'
// memory (also when the tensor is deleted meanwhile) and the bytes cannot
// change under the reader, since no process can write them (sealed memory,
// mapped PROT_READ here: a write faults). Close() -- or destruction --
// unmaps and ends the export. A view that outlives its export (the session
// ended, the tensor's owner unexported it) still reads the shard's bytes as
// they last were, never another tensor's.
//
// On a CUDA daemon the shards are device memory: each Shard carries the
// cudaIpcMemHandle_t bytes (cuda_ipc_handle, bytes at `offset`) to open with
// cudaIpcOpenMemHandle, and bytes() is empty; the library itself does not
// link CUDA. Close the IPC mapping before closing the view.
//
// A TensorView holds a reference to the Client, which must outlive it. Its
// accessors are thread-safe; Close is not concurrent with them.
#ifndef PLACEMENT_CLIENT_VIEWS_H_
#define PLACEMENT_CLIENT_VIEWS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/tensor_info.h"

namespace placement::client {

struct ViewOptions {
  // Indices into TensorInfo::shards to view; empty = every shard the daemon
  // holds (in a cluster, its own node's).
  std::vector<int32_t> shard_indices;
};

// An export open on the daemon (ViewService.ListExports).
struct ExportInfo {
  std::string id;  // "x-" and 32 hex digits
  std::string tensor_id;
  std::string tenant;
  std::string session_id;
  int32_t num_shards = 0;
  int64_t size_bytes = 0;
  int64_t reader_pid = 0;  // the process that took the memory; 0 before

  bool operator==(const ExportInfo&) const = default;
};

struct ExportList {
  std::vector<ExportInfo> exports;  // the caller's (an admin's: all), by id
  // Since the daemon started, for the caller's tenant (an admin: all).
  int64_t exports_total = 0;
  int64_t bytes_total = 0;
};

// ViewService.ListExports: what `placectl top` shows.
absl::StatusOr<ExportList> ListExports(const Client& client);
// Ends an export by id (a TensorView does so itself); NOT_FOUND for an id
// the caller does not see.
absl::Status Unexport(const Client& client, const std::string& export_id);

class TensorView {
 public:
  struct Shard {
    int32_t index = 0;  // into tensor().shards
    ShardInfo info;
    // The shard's box of the array, row-major (what Download of its device
    // returns); empty for an empty shard and on a CUDA daemon.
    std::span<const std::byte> bytes;
    // A private copy the daemon made for this export (shards under 256 KiB
    // share memory with other tensors), not the shard's own memory.
    bool copied = false;
    // CUDA daemon: the cudaIpcMemHandle_t of the allocation, the shard's
    // bytes at `offset` in it.
    std::string cuda_ipc_handle;
    int64_t offset = 0;
  };

  // FAILED_PRECONDITION when the daemon is not on this host (views need its
  // memory), or has fd passing off; the daemon's codes otherwise
  // (view_service.proto: NOT_FOUND, INVALID_ARGUMENT shard index, ...).
  static absl::StatusOr<std::unique_ptr<TensorView>> Open(const Client& client,
                                                          const std::string& tensor_id,
                                                          const ViewOptions& options = {});
  // Close(), ignoring its status.
  ~TensorView();
  TensorView(const TensorView&) = delete;
  TensorView& operator=(const TensorView&) = delete;

  const TensorInfo& tensor() const { return tensor_; }
  const std::string& export_id() const { return export_id_; }
  const std::vector<Shard>& shards() const { return shards_; }
  // shards()[i].bytes.
  std::span<const std::byte> bytes(size_t i) const { return shards_.at(i).bytes; }
  // Shard bytes over every viewed shard.
  int64_t size_bytes() const;

  // The whole array, row-major, assembled into `out` from the viewed shards
  // (each distinct box once, one memcpy per row): what Download returns,
  // without a transfer. INVALID_ARGUMENT when `out` is smaller than the
  // array; FAILED_PRECONDITION when the viewed shards do not cover it (a
  // cluster's other nodes hold the rest, or a shard selection), for a
  // partial tensor (its shards are contributions to reduce), a closed view
  // or a CUDA daemon's.
  absl::Status CopyTo(std::span<std::byte> out) const;

  // Unmaps the shards (their spans become empty) and ends the export
  // (Unexport). Idempotent; the Unexport status (NOT_FOUND when the daemon
  // ended the export already: its session ended or its reader exited).
  absl::Status Close();

 private:
  struct Mapping {
    void* base = nullptr;
    size_t length = 0;
  };
  TensorView(const Client& client, TensorInfo tensor, std::string export_id)
      : client_(client), tensor_(std::move(tensor)), export_id_(std::move(export_id)) {}

  const Client& client_;
  TensorInfo tensor_;
  std::string export_id_;
  std::vector<Shard> shards_;
  std::vector<Mapping> mappings_;
  bool open_ = true;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_VIEWS_H_
