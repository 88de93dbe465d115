// The kAuto region paths of TensorClient (tensors_region.cc). Each returns
// nullopt when the transfer should take the gRPC stream instead (remote
// daemon, kStream, a small transfer, or no staging region could be had under
// kAuto), else the transfer's result. Not installed.
#ifndef PLACEMENT_CLIENT_SRC_TENSORS_REGION_H_
#define PLACEMENT_CLIENT_SRC_TENSORS_REGION_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "client/src/region_pool.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.pb.h"

namespace placement::client {

// Copies the array into a staging region and uploads it from there.
// REQUIRES: array.data holds exactly ExpectedBytes(array.dtype, array.shape).
std::optional<absl::StatusOr<TensorInfo>> UploadThroughStaging(const Client& client,
                                                               const HostArray& array,
                                                               const Rule& rule,
                                                               const UploadOptions& options);

// Has the daemon write into a staging region of out.size() bytes, then
// copies into `out`.
std::optional<absl::StatusOr<DownloadHeader>> DownloadThroughStaging(
    const Client& client, const std::string& tensor_id, absl::Span<uint8_t> out,
    const DownloadSelection& selection, const DownloadOptions& options);

// Reads the whole array from `reader` into a staging region, then uploads
// it from there. A short reader is INVALID_ARGUMENT as on the stream.
std::optional<absl::StatusOr<TensorInfo>> UploadFromThroughStaging(
    const Client& client, DType dtype, const std::vector<int64_t>& shape, const ByteReader& reader,
    const Rule& rule, const UploadOptions& options);

// Has the daemon write the selection into a staging region sized from
// Describe, then feeds `on_header` and `on_chunk` (pieces of at most
// options.chunk_bytes, 1 MiB when 0) from it.
std::optional<absl::StatusOr<DownloadHeader>> DownloadToSinksThroughStaging(
    const Client& client, const std::string& tensor_id, const HeaderSink& on_header,
    const ChunkSink& on_chunk, const DownloadSelection& selection, const DownloadOptions& options);

// Under the path's rule, a staging region holding `arrays` back to back (in
// order, no padding), for an UploadBatch sent as one region slice per
// array; nullopt for the stream.
absl::StatusOr<std::optional<RegionPool::Lease>> StageBatchArrays(
    const Client& client, const std::vector<BatchArray>& arrays, TransferPath path);

// The selection fields of a DownloadRequest (defined in tensors_download.cc).
void ApplySelection(const DownloadSelection& selection, placement::v1::DownloadRequest* request);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_TENSORS_REGION_H_
