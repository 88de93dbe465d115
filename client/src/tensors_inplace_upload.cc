// TensorClient::Upload written in place (tensors_inplace.h).
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "client/src/box_copy.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/parallel_copy.h"
#include "client/src/piece_progress.h"
#include "client/src/region_fd.h"
#include "client/src/region_pool.h"
#include "client/src/tensors_inplace.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/view_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

void CancelQuietly(const Client& client, pb::ViewService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  client.impl().Prepare(&context, absl::Seconds(10));
  pb::CancelUploadRequest request;
  request.set_reservation_id(id);
  pb::CancelUploadResponse response;
  stub.CancelUpload(&context, request, &response);
}

// Writes every slot of `reserved` from `array` and commits.
absl::StatusOr<TensorInfo> WriteAndCommit(const Client& client, pb::ViewService::Stub& stub,
                                          RegionPool& pool, const std::string& socket,
                                          const HostArray& array,
                                          const pb::ReserveUploadResponse& reserved,
                                          const UploadOptions& options) {
  absl::StatusOr<std::vector<int>> fds = RedeemViewToken(socket, reserved.fd_token());
  if (!fds.ok()) return fds.status();
  std::vector<std::shared_ptr<WritableMappings::Mapping>> mapped(fds->size());
  absl::Status status;
  for (const pb::UploadSlot& slot : reserved.slots()) {
    const int index = slot.fd_index();
    if (index < 0) continue;  // an empty shard
    if (index >= static_cast<int>(fds->size())) {
      status = absl::InternalError(
          absl::StrCat("the daemon handed ", fds->size(), " fds for a slot with fd_index ", index));
      break;
    }
    if (mapped[index] == nullptr) {
      absl::StatusOr<std::shared_ptr<WritableMappings::Mapping>> mapping =
          pool.mappings().Map((*fds)[index], slot.mapping_bytes());
      if (!mapping.ok()) {
        status = mapping.status();
        break;
      }
      mapped[index] = *std::move(mapping);
    }
  }
  // Open until the copies are done: a file with no pages yet is filled
  // through its fd (FillFreshFile).
  absl::Cleanup close_fds = [&fds] {
    for (int fd : *fds) {
      if (fd >= 0) close(fd);
    }
  };
  if (!status.ok()) return status;
  const TensorInfo planned = FromProto(reserved.tensor());
  const int64_t element = ElementSize(array.dtype);
  int64_t total = 0;  // every slot's bytes, replicas included
  for (const pb::UploadSlot& slot : reserved.slots()) {
    if (slot.fd_index() >= 0) total += slot.size_bytes();
  }
  PieceProgress progress(options.progress, total);
  const auto* source = reinterpret_cast<const std::byte*>(array.data.data());
  for (const pb::UploadSlot& slot : reserved.slots()) {
    if (slot.fd_index() < 0) continue;
    const WritableMappings::Mapping& mapping = *mapped[slot.fd_index()];
    if (slot.shard_index() < 0 || slot.shard_index() >= static_cast<int>(planned.shards.size()) ||
        slot.offset() < 0 || slot.offset() + slot.size_bytes() > mapping.length() ||
        slot.size_bytes() !=
            BoxBytes(array.shape, planned.shards[slot.shard_index()].ranges, element)) {
      return absl::InternalError(absl::StrCat("the daemon's slot for shard ", slot.shard_index(),
                                              " (", slot.size_bytes(), " bytes at offset ",
                                              slot.offset(), ") does not fit its box or memory"));
    }
    const int fd = (*fds)[slot.fd_index()];
    const std::vector<IndexRange>& box = planned.shards[slot.shard_index()].ranges;
    std::byte* into = mapping.base() + slot.offset();
    std::byte* const base = mapping.base();
    // A box that is one run of the array fills a file with no pages through
    // its fd (FillFreshFile); a box of many rows (cut along a later
    // dimension) has its pages mapped in first, then is copied row by row.
    bool fresh = FileHasNoPages(fd);
    if (fresh && !IsOneRun(array.shape, box)) {
      PopulateRange(into, static_cast<size_t>(slot.size_bytes()));
      fresh = false;
    }
    CopyArrayToBox(array.shape, box, element, source, into,
                   [&](std::byte* to, const std::byte* from, size_t n) {
                     progress.Copy(to, from, n, [&](std::byte* t, const std::byte* f, size_t k) {
                       if (fresh) {
                         FillFreshFile(fd, t - base, t, f, k);
                       } else {
                         ParallelCopy(t, f, k);
                       }
                     });
                   });
    progress.Flush();
  }
  grpc::ClientContext context;
  client.impl().Prepare(&context, options.timeout);
  pb::CommitUploadRequest request;
  request.set_reservation_id(reserved.reservation_id());
  pb::CommitUploadResponse response;
  grpc::Status committed = stub.CommitUpload(&context, request, &response);
  if (!committed.ok()) return FromGrpcStatus(committed);
  return FromProto(response.tensor());
}

}  // namespace

std::optional<absl::StatusOr<TensorInfo>> UploadInPlace(const Client& client,
                                                        const HostArray& array, const Rule& rule,
                                                        const UploadOptions& options) {
  const bool forced = options.path == TransferPath::kInPlace;
  if (!forced && options.process_local.has_value()) return std::nullopt;
  auto route = RouteInPlace(client, options.path, static_cast<int64_t>(array.data.size()));
  if (!route.has_value()) return std::nullopt;
  if (!route->ok()) return route->status();
  const std::shared_ptr<RegionPool>& pool = (*route)->pool;
  const std::string& socket = (*route)->socket;

  pb::ReserveUploadRequest request;
  absl::Status header =
      FillUploadHeader(array.dtype, array.shape, rule, options, request.mutable_header());
  if (!header.ok()) return header;
  auto stub = pb::ViewService::NewStub(client.impl().channel);
  pb::ReserveUploadResponse reserved;
  {
    grpc::ClientContext context;
    client.impl().Prepare(&context, options.timeout);
    grpc::Status status = stub->ReserveUpload(&context, request, &reserved);
    if (!status.ok()) {
      absl::Status error = FromGrpcStatus(status);
      if (forced || !InPlaceDeclined(error)) return error;
      // A daemon or platform that never can: ask no more on this Client.
      if (absl::IsUnimplemented(error)) pool->DeclineInPlace();
      return std::nullopt;
    }
  }
  absl::StatusOr<TensorInfo> info =
      WriteAndCommit(client, *stub, *pool, socket, array, reserved, options);
  if (!info.ok()) CancelQuietly(client, *stub, reserved.reservation_id());
  return info;
}

}  // namespace placement::client
