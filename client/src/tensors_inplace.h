// TensorClient::Upload written straight into the daemon's memory
// (ViewService.ReserveUpload / CommitUpload, docs/api/views.md "Writing in
// place") and Download read straight out of it (ExportShards for_copy): one
// copy of the bytes, by this process, through mappings the Client keeps
// (WritableMappings). Not installed.
#ifndef PLACEMENT_CLIENT_SRC_TENSORS_INPLACE_H_
#define PLACEMENT_CLIENT_SRC_TENSORS_INPLACE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "client/src/region_pool.h"
#include "placement/client/tensors.h"

namespace placement::client {

// Whether kAuto should take another path after `status` from ReserveUpload
// or ExportShards: the daemon cannot do this transfer in place (a platform,
// a shard, a bound on reservations or exports), but may take it otherwise
// (a budget refusal then comes back from that path, in its words).
inline bool InPlaceDeclined(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) || absl::IsUnimplemented(status) ||
         absl::IsResourceExhausted(status);
}

// Arrays of at least this many bytes are written in place under kAuto.
inline constexpr int64_t kInPlaceMinBytes = int64_t{1} << 20;

// Where a transfer of `bytes` under `path` goes in place: the Client's pool
// and the daemon's region socket. nullopt: another path (kAuto only: a
// remote daemon, fewer than kInPlaceMinBytes, or in place declined before);
// an error: kInPlace against a remote daemon, or GetStatus's.
struct InPlaceRoute {
  std::shared_ptr<RegionPool> pool;
  std::string socket;
};
std::optional<absl::StatusOr<InPlaceRoute>> RouteInPlace(const Client& client, TransferPath path,
                                                         int64_t bytes);

// Under kInPlace always, under kAuto when the daemon is on this host, the
// array has kInPlaceMinBytes or more and no process_local is set: reserves,
// writes every shard's box, commits. nullopt: take another path (kAuto only,
// also when the daemon answers that it cannot: a platform without writable
// memory, a small or remote shard). Under kInPlace those answers are the
// result. Any failure after the reservation cancels it.
// REQUIRES: array.data holds exactly its dtype and shape's bytes.
std::optional<absl::StatusOr<TensorInfo>> UploadInPlace(const Client& client,
                                                        const HostArray& array, const Rule& rule,
                                                        const UploadOptions& options);

// TensorClient::Download of the whole array read in place (ExportShards
// for_copy): under kInPlace always, under kAuto when the daemon is on this
// host and `out` has kInPlaceMinBytes or more. The shards' memory is mapped
// through the Client's WritableMappings where the daemon hands it over
// unsealed (a block this Client wrote in place is mapped already), each
// distinct box is copied into `out`, and the export ends. nullopt: take
// another path (kAuto only, also for a partial tensor, shards on other
// daemons, or a daemon that cannot export).
std::optional<absl::StatusOr<DownloadHeader>> DownloadInPlace(const Client& client,
                                                              const std::string& tensor_id,
                                                              absl::Span<uint8_t> out,
                                                              const DownloadSelection& selection,
                                                              const DownloadOptions& options);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_TENSORS_INPLACE_H_
