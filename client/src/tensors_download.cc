// Client side of TensorService.Download: a header, then chunks handed to the
// caller's sink (or copied into the caller's buffer) one at a time.
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/tensors_inplace.h"
#include "client/src/tensors_region.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/tensors.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
void ApplySelection(const DownloadSelection& selection, pb::DownloadRequest* request) {
  switch (selection.kind()) {
    case DownloadSelection::Kind::kWhole:
      request->set_whole(true);
      break;
    case DownloadSelection::Kind::kDevice:
      request->set_device_id(selection.device_id());
      break;
    case DownloadSelection::Kind::kDevices:
      for (int64_t d : selection.device_ids()) request->mutable_devices()->add_device_ids(d);
      // An empty set still selects "devices" (the daemon rejects it).
      request->mutable_devices();
      break;
    case DownloadSelection::Kind::kProcess:
      request->set_process_index(selection.process_index());
      break;
  }
}

absl::StatusOr<DownloadHeader> TensorClient::Download(const std::string& tensor_id,
                                                      const HeaderSink& on_header,
                                                      const ChunkSink& on_chunk,
                                                      const DownloadSelection& selection,
                                                      const DownloadOptions& options) const {
  if (auto through_region = DownloadToSinksThroughStaging(client_, tensor_id, on_header, on_chunk,
                                                          selection, options)) {
    return *std::move(through_region);
  }
  pb::DownloadRequest request;
  request.set_tensor_id(tensor_id);
  ApplySelection(selection, &request);
  request.set_chunk_size_bytes(options.chunk_bytes);

  auto stub = pb::TensorService::NewStub(client_.impl().channel);
  grpc::ClientContext context;
  client_.impl().Prepare(&context, options.timeout);
  auto reader = stub->Download(&context, request);

  // Stops the stream early with `status` (the caller's, or ours).
  auto abandon = [&](absl::Status status) -> absl::Status {
    context.TryCancel();
    pb::DownloadResponse drain;
    while (reader->Read(&drain)) {
    }
    reader->Finish();
    return status;
  };

  pb::DownloadResponse message;
  DownloadHeader header;
  bool have_header = false;
  int64_t received = 0;
  while (reader->Read(&message)) {
    if (message.has_header()) {
      if (have_header) {
        return abandon(absl::InternalError(
            absl::StrCat("download of ", tensor_id, ": the daemon sent a second header")));
      }
      header = FromProto(message.header());
      have_header = true;
      absl::Status accepted = on_header ? on_header(header) : absl::OkStatus();
      if (!accepted.ok()) return abandon(accepted);
      continue;
    }
    if (!have_header) {
      return abandon(absl::InternalError(
          absl::StrCat("download of ", tensor_id, ": the daemon sent bytes before the header")));
    }
    const std::string& chunk = message.chunk();
    received += static_cast<int64_t>(chunk.size());
    if (received > header.total_bytes) {
      return abandon(absl::InternalError(
          absl::StrCat("download of ", tensor_id, ": the daemon sent ", received,
                       " bytes, its header promised ", header.total_bytes)));
    }
    absl::Status accepted =
        on_chunk(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(chunk.data()), chunk.size()));
    if (!accepted.ok()) return abandon(accepted);
    if (options.progress && received < header.total_bytes) {
      options.progress(received, header.total_bytes);
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  if (!have_header) {
    return absl::InternalError(
        absl::StrCat("download of ", tensor_id, ": the stream ended without a header"));
  }
  if (received != header.total_bytes) {
    return absl::DataLossError(absl::StrCat("download of ", tensor_id, ": received ", received,
                                            " of ", header.total_bytes, " bytes"));
  }
  if (options.progress) options.progress(header.total_bytes, header.total_bytes);
  return header;
}

absl::StatusOr<DownloadHeader> TensorClient::Download(const std::string& tensor_id,
                                                      absl::Span<uint8_t> out,
                                                      const DownloadSelection& selection,
                                                      const DownloadOptions& options) const {
  if (auto in_place = DownloadInPlace(client_, tensor_id, out, selection, options)) {
    return *std::move(in_place);
  }
  if (auto through_region = DownloadThroughStaging(client_, tensor_id, out, selection, options)) {
    return *std::move(through_region);
  }
  int64_t offset = 0;
  auto on_header = [&](const DownloadHeader& header) -> absl::Status {
    if (header.total_bytes > static_cast<int64_t>(out.size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("output buffer holds ", out.size(), " bytes; tensor ", tensor_id, " needs ",
                       header.total_bytes, " for ", DescribeArray(header.dtype, header.shape)));
    }
    return absl::OkStatus();
  };
  auto on_chunk = [&](absl::Span<const uint8_t> chunk) -> absl::Status {
    std::memcpy(out.data() + offset, chunk.data(), chunk.size());
    offset += static_cast<int64_t>(chunk.size());
    return absl::OkStatus();
  };
  return Download(tensor_id, on_header, on_chunk, selection, options);
}

absl::StatusOr<DownloadedBytes> TensorClient::DownloadBytes(const std::string& tensor_id,
                                                            const DownloadSelection& selection,
                                                            const DownloadOptions& options) const {
  DownloadedBytes result;
  auto on_header = [&](const DownloadHeader& header) -> absl::Status {
    result.bytes.reserve(static_cast<size_t>(header.total_bytes));
    return absl::OkStatus();
  };
  auto on_chunk = [&](absl::Span<const uint8_t> chunk) -> absl::Status {
    result.bytes.insert(result.bytes.end(), chunk.begin(), chunk.end());
    return absl::OkStatus();
  };
  auto header = Download(tensor_id, on_header, on_chunk, selection, options);
  if (!header.ok()) return header.status();
  result.header = *std::move(header);
  return result;
}

}  // namespace placement::client
