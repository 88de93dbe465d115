// TensorClient through same-host regions: UploadFromRegion / DownloadToRegion
// (the caller's region) and the kAuto paths of Upload / UploadBatch /
// Download (a staging region from the Client's RegionPool).
#include "client/src/tensors_region.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/parallel_copy.h"
#include "client/src/region_pool.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

void SetSlice(const SharedRegion& region, int64_t offset, int64_t size, pb::RegionSlice* slice) {
  slice->set_region_id(region.id());
  slice->set_offset(offset);
  slice->set_size(size);
}

absl::StatusOr<TensorInfo> UploadSlice(const Client& client, const SharedRegion& region,
                                       int64_t offset, DType dtype,
                                       const std::vector<int64_t>& shape, const Rule& rule,
                                       const UploadOptions& options) {
  absl::StatusOr<int64_t> total = ExpectedBytes(dtype, shape);
  if (!total.ok()) return total.status();
  pb::UploadRequest message;
  absl::Status header_ok = FillUploadHeader(dtype, shape, rule, options, message.mutable_header());
  if (!header_ok.ok()) return header_ok;
  auto stub = pb::TensorService::NewStub(client.impl().channel);
  grpc::ClientContext context;
  client.impl().Prepare(&context, options.timeout);
  pb::UploadResponse response;
  auto writer = stub->Upload(&context, &response);
  bool ok = writer->Write(message);
  if (ok && *total > 0) {
    SetSlice(region, offset, *total, message.mutable_region());
    ok = writer->Write(message);
  }
  if (ok) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!ok) {
    return absl::UnavailableError(absl::StrCat("upload of ", DescribeArray(dtype, shape),
                                               ": the daemon closed the stream early"));
  }
  if (options.progress) options.progress(*total, *total);
  return FromProto(response.tensor());
}

}  // namespace

absl::StatusOr<TensorInfo> TensorClient::UploadFromRegion(const SharedRegion& region,
                                                          int64_t offset, DType dtype,
                                                          std::vector<int64_t> shape,
                                                          const Rule& rule,
                                                          const UploadOptions& options) const {
  return UploadSlice(client_, region, offset, dtype, shape, rule, options);
}

absl::StatusOr<DownloadHeader> TensorClient::DownloadToRegion(
    const std::string& tensor_id, const SharedRegion& region, int64_t offset,
    const DownloadSelection& selection, const DownloadOptions& options) const {
  pb::DownloadRequest request;
  request.set_tensor_id(tensor_id);
  ApplySelection(selection, &request);
  SetSlice(region, offset, region.size() - offset, request.mutable_destination());
  if (offset < 0 || offset > region.size()) request.mutable_destination()->set_size(0);
  auto stub = pb::TensorService::NewStub(client_.impl().channel);
  grpc::ClientContext context;
  client_.impl().Prepare(&context, options.timeout);
  auto reader = stub->Download(&context, request);
  pb::DownloadResponse message;
  pb::DownloadHeader header;
  while (reader->Read(&message)) {
    if (message.has_header()) header = std::move(*message.mutable_header());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(header);
}

std::optional<absl::StatusOr<TensorInfo>> UploadThroughStaging(const Client& client,
                                                               const HostArray& array,
                                                               const Rule& rule,
                                                               const UploadOptions& options) {
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  const int64_t bytes = static_cast<int64_t>(array.data.size());
  absl::StatusOr<bool> use = pool->UseRegion(options.path, bytes);
  if (!use.ok()) return use.status();
  if (!*use) return std::nullopt;
  absl::StatusOr<RegionPool::Lease> lease = pool->Borrow(bytes);
  if (!lease.ok()) {
    if (options.path != TransferPath::kAuto) return lease.status();
    return std::nullopt;  // kAuto: fall back to the stream
  }
  ParallelCopy(lease->region().data(), array.data.data(), array.data.size());
  return UploadSlice(client, lease->region(), 0, array.dtype, array.shape, rule, options);
}

std::optional<absl::StatusOr<DownloadHeader>> DownloadThroughStaging(
    const Client& client, const std::string& tensor_id, absl::Span<uint8_t> out,
    const DownloadSelection& selection, const DownloadOptions& options) {
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  const int64_t bytes = static_cast<int64_t>(out.size());
  absl::StatusOr<bool> use = pool->UseRegion(options.path, bytes);
  if (!use.ok()) return use.status();
  if (!*use) return std::nullopt;
  absl::StatusOr<RegionPool::Lease> lease = pool->Borrow(bytes);
  if (!lease.ok()) {
    if (options.path != TransferPath::kAuto) return lease.status();
    return std::nullopt;
  }
  pb::DownloadRequest request;
  request.set_tensor_id(tensor_id);
  ApplySelection(selection, &request);
  // Offer exactly the caller's buffer: a larger tensor is OUT_OF_RANGE.
  SetSlice(lease->region(), 0, bytes, request.mutable_destination());
  if (bytes == 0) return std::nullopt;  // size 0 means "any"; let the stream check
  auto stub = pb::TensorService::NewStub(client.impl().channel);
  grpc::ClientContext context;
  client.impl().Prepare(&context, options.timeout);
  auto reader = stub->Download(&context, request);
  pb::DownloadResponse message;
  pb::DownloadHeader header;
  while (reader->Read(&message)) {
    if (message.has_header()) header = std::move(*message.mutable_header());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    if (status.error_code() == grpc::StatusCode::OUT_OF_RANGE) {
      return absl::InvalidArgumentError(absl::StrCat("output buffer holds ", out.size(),
                                                     " bytes; tensor ", tensor_id, " needs more (",
                                                     status.error_message(), ")"));
    }
    return FromGrpcStatus(status);
  }
  // The daemon wrote at most the slice offered; a header that says more (a
  // daemon of another version, a bug) must not overrun the caller's buffer.
  if (header.total_bytes() < 0 || static_cast<size_t>(header.total_bytes()) > out.size()) {
    return absl::InternalError(absl::StrCat("the daemon's download header claims ",
                                            header.total_bytes(), " bytes for tensor ", tensor_id,
                                            "; the region slice offered holds ", out.size()));
  }
  ParallelCopy(out.data(), lease->region().data(), static_cast<size_t>(header.total_bytes()));
  if (options.progress) options.progress(header.total_bytes(), header.total_bytes());
  return FromProto(header);
}

absl::StatusOr<std::optional<RegionPool::Lease>> StageBatchArrays(
    const Client& client, const std::vector<BatchArray>& arrays, TransferPath path) {
  if (path == TransferPath::kStream) return std::nullopt;
  int64_t total = 0;
  for (const BatchArray& a : arrays) total += static_cast<int64_t>(a.array.data.size());
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  absl::StatusOr<bool> use = pool->UseRegion(path, total);
  if (!use.ok()) return use.status();
  if (!*use || total == 0) return std::nullopt;
  absl::StatusOr<RegionPool::Lease> lease = pool->Borrow(total);
  if (!lease.ok()) {
    if (path != TransferPath::kAuto) return lease.status();
    return std::nullopt;
  }
  int64_t offset = 0;
  for (const BatchArray& a : arrays) {
    ParallelCopy(lease->region().data() + offset, a.array.data.data(), a.array.data.size());
    offset += static_cast<int64_t>(a.array.data.size());
  }
  return std::optional<RegionPool::Lease>(*std::move(lease));
}

std::optional<absl::StatusOr<TensorInfo>> UploadFromThroughStaging(
    const Client& client, DType dtype, const std::vector<int64_t>& shape, const ByteReader& reader,
    const Rule& rule, const UploadOptions& options) {
  absl::StatusOr<int64_t> total = ExpectedBytes(dtype, shape);
  if (!total.ok()) return std::nullopt;  // the stream path reports it
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  absl::StatusOr<bool> use = pool->UseRegion(options.path, *total);
  if (!use.ok()) return use.status();
  if (!*use || *total == 0) return std::nullopt;
  absl::StatusOr<RegionPool::Lease> lease = pool->Borrow(*total);
  if (!lease.ok()) {
    if (options.path != TransferPath::kAuto) return lease.status();
    return std::nullopt;
  }
  uint8_t* data = lease->region().data();
  int64_t filled = 0;
  while (filled < *total) {
    // Pieces of at most kFillPiece, so that progress moves while a slow
    // reader (a file, a decoder) fills the region.
    constexpr int64_t kFillPiece = int64_t{8} << 20;
    absl::StatusOr<size_t> n =
        reader(absl::MakeSpan(data + filled, std::min(kFillPiece, *total - filled)));
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    if (static_cast<int64_t>(*n) > *total - filled) {
      return absl::InternalError(absl::StrCat("ByteReader returned ", *n, " bytes for a ",
                                              *total - filled, "-byte buffer"));
    }
    filled += static_cast<int64_t>(*n);
    if (options.progress && filled < *total) options.progress(filled, *total);
  }
  if (filled != *total) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", *total, " bytes for ",
                                                   DescribeArray(dtype, shape), ", got ", filled));
  }
  return UploadSlice(client, lease->region(), 0, dtype, shape, rule, options);
}

std::optional<absl::StatusOr<DownloadHeader>> DownloadToSinksThroughStaging(
    const Client& client, const std::string& tensor_id, const HeaderSink& on_header,
    const ChunkSink& on_chunk, const DownloadSelection& selection, const DownloadOptions& options) {
  if (options.path == TransferPath::kStream) return std::nullopt;
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  // Room for the selection: the array for a whole download, every shard's
  // bytes (an upper bound of any device selection) otherwise.
  absl::StatusOr<TensorInfo> info = TensorClient(client).Describe(tensor_id);
  if (!info.ok()) return std::nullopt;  // the stream path reports it
  const int64_t room = selection.kind() == DownloadSelection::Kind::kWhole
                           ? info->size_bytes
                           : std::max(info->size_bytes, info->device_bytes);
  absl::StatusOr<bool> use = pool->UseRegion(options.path, room);
  if (!use.ok()) return use.status();
  if (!*use || room == 0) return std::nullopt;
  absl::StatusOr<RegionPool::Lease> lease = pool->Borrow(room);
  if (!lease.ok()) {
    if (options.path != TransferPath::kAuto) return lease.status();
    return std::nullopt;
  }
  pb::DownloadRequest request;
  request.set_tensor_id(tensor_id);
  ApplySelection(selection, &request);
  SetSlice(lease->region(), 0, lease->region().size(), request.mutable_destination());
  auto stub = pb::TensorService::NewStub(client.impl().channel);
  grpc::ClientContext context;
  client.impl().Prepare(&context, options.timeout);
  auto reader = stub->Download(&context, request);
  pb::DownloadResponse message;
  pb::DownloadHeader header;
  while (reader->Read(&message)) {
    if (message.has_header()) header = std::move(*message.mutable_header());
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  DownloadHeader result = FromProto(header);
  if (on_header) {
    absl::Status accepted = on_header(result);
    if (!accepted.ok()) return accepted;
  }
  const int64_t piece = options.chunk_bytes > 0 ? options.chunk_bytes : int64_t{1} << 20;
  for (int64_t offset = 0; offset < result.total_bytes; offset += piece) {
    const int64_t n = std::min(piece, result.total_bytes - offset);
    absl::Status taken = on_chunk(absl::MakeConstSpan(lease->region().data() + offset, n));
    if (!taken.ok()) return taken;
    if (options.progress && offset + n < result.total_bytes) {
      options.progress(offset + n, result.total_bytes);
    }
  }
  if (options.progress) options.progress(result.total_bytes, result.total_bytes);
  return result;
}

}  // namespace placement::client
