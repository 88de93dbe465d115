#include "client/src/tensors_inplace.h"

#include <sys/mman.h>
#include <unistd.h>

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/box_copy.h"
#include "client/src/call_context.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/region_fd.h"
#include "client/src/region_pool.h"
#include "client/src/shard_export.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/views.h"
#include "placement/v1/view_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// Whether kAuto should take another path after `status` from ReserveUpload:
// the daemon cannot write this transfer in place, but can take it otherwise.
bool Declined(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) || absl::IsUnimplemented(status);
}

void CancelQuietly(pb::ViewService::Stub& stub, const std::string& id) {
  grpc::ClientContext context;
  SetTimeout(absl::Seconds(10), &context);
  pb::CancelUploadRequest request;
  request.set_reservation_id(id);
  pb::CancelUploadResponse response;
  stub.CancelUpload(&context, request, &response);
}

// Writes every slot of `reserved` from `array` and commits.
absl::StatusOr<TensorInfo> WriteAndCommit(pb::ViewService::Stub& stub, RegionPool& pool,
                                          const std::string& socket, const HostArray& array,
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
          pool.mappings().Map(std::exchange((*fds)[index], -1), slot.mapping_bytes());
      if (!mapping.ok()) {
        status = mapping.status();
        break;
      }
      mapped[index] = *std::move(mapping);
    }
  }
  for (int fd : *fds) {
    if (fd >= 0) close(fd);
  }
  if (!status.ok()) return status;
  const TensorInfo planned = FromProto(reserved.tensor());
  const int64_t element = ElementSize(array.dtype);
  const int64_t total = static_cast<int64_t>(array.data.size()) * reserved.slots_size();
  int64_t done = 0;
  const auto* source = reinterpret_cast<const std::byte*>(array.data.data());
  for (const pb::UploadSlot& slot : reserved.slots()) {
    if (slot.fd_index() < 0) continue;
    const WritableMappings::Mapping& mapping = *mapped[slot.fd_index()];
    if (slot.shard_index() < 0 || slot.shard_index() >= static_cast<int>(planned.shards.size()) ||
        slot.offset() < 0 || slot.offset() + slot.size_bytes() > mapping.length()) {
      return absl::InternalError(absl::StrCat("the daemon's slot for shard ", slot.shard_index(),
                                              " lies outside its memory"));
    }
    done += CopyArrayToBox(array.shape, planned.shards[slot.shard_index()].ranges, element, source,
                           mapping.base() + slot.offset());
    if (options.progress) options.progress(done, total);
  }
  grpc::ClientContext context;
  SetTimeout(options.timeout, &context);
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
  const auto bytes = static_cast<int64_t>(array.data.size());
  if (!forced && (options.path != TransferPath::kAuto || bytes < kInPlaceMinBytes ||
                  options.process_local.has_value())) {
    return std::nullopt;
  }
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  if (!forced && pool->in_place_declined()) return std::nullopt;
  absl::StatusOr<bool> same_host = pool->UseRegion(options.path, bytes);
  if (!same_host.ok()) return same_host.status();
  if (!*same_host) return std::nullopt;
  absl::StatusOr<std::string> socket = pool->SameHostSocket();
  if (!socket.ok()) return socket.status();

  pb::ReserveUploadRequest request;
  absl::Status header =
      FillUploadHeader(array.dtype, array.shape, rule, options, request.mutable_header());
  if (!header.ok()) return header;
  auto stub = pb::ViewService::NewStub(client.impl().channel);
  pb::ReserveUploadResponse reserved;
  {
    grpc::ClientContext context;
    SetTimeout(options.timeout, &context);
    grpc::Status status = stub->ReserveUpload(&context, request, &reserved);
    if (!status.ok()) {
      absl::Status error = FromGrpcStatus(status);
      if (forced || !Declined(error)) return error;
      // A daemon or platform that never can: ask no more on this Client.
      if (absl::IsUnimplemented(error)) pool->DeclineInPlace();
      return std::nullopt;
    }
  }
  absl::StatusOr<TensorInfo> info = WriteAndCommit(*stub, *pool, *socket, array, reserved, options);
  if (!info.ok()) CancelQuietly(*stub, reserved.reservation_id());
  return info;
}

namespace {

// A read-only mapping of a sealed shard (or a private copy): the daemon
// never reuses such memory, so it is not kept.
struct SealedMapping {
  SealedMapping() = default;
  SealedMapping(const SealedMapping&) = delete;
  SealedMapping& operator=(const SealedMapping&) = delete;
  ~SealedMapping() {
    if (base != nullptr) munmap(base, length);
  }
  void* base = nullptr;
  size_t length = 0;
};

// Copies every distinct box of `exported` into `out` (the whole array, row
// major); `tensor` is the exported tensor. FAILED_PRECONDITION (with
// `*elsewhere` set) when the exported shards do not cover the array.
absl::Status CopyOut(RegionPool& pool, const TensorInfo& tensor, RedeemedExport& exported,
                     absl::Span<uint8_t> out, int64_t total, bool* elsewhere) {
  const int64_t element = ElementSize(tensor.dtype);
  // Which boxes the exported shards hold, before anything is mapped.
  std::vector<const placement::v1::ShardView*> distinct;
  std::vector<std::vector<IndexRange>> boxes;
  int64_t covered = 0;
  for (const placement::v1::ShardView& view : exported.response.shards()) {
    const int index = view.shard_index();
    if (index < 0 || index >= static_cast<int>(tensor.shards.size()) || view.fd_index() < 0 ||
        view.fd_index() >= static_cast<int>(exported.fds.size())) {
      continue;
    }
    const std::vector<IndexRange>& ranges = tensor.shards[index].ranges;
    if (std::find(boxes.begin(), boxes.end(), ranges) != boxes.end()) continue;
    boxes.push_back(ranges);
    distinct.push_back(&view);
    covered += view.size_bytes();
  }
  if (covered < total) {
    *elsewhere = true;
    return absl::FailedPreconditionError(
        absl::StrCat("the shards of tensor '", tensor.id, "' on this daemon hold ", covered,
                     " of its ", total, " bytes; download it through the stream"));
  }
  auto* array = reinterpret_cast<std::byte*>(out.data());
  for (size_t k = 0; k < distinct.size(); ++k) {
    const placement::v1::ShardView& view = *distinct[k];
    int& fd = exported.fds[view.fd_index()];
    std::shared_ptr<WritableMappings::Mapping> kept;
    SealedMapping sealed;
    const std::byte* base = nullptr;
    if (view.writable()) {
      absl::StatusOr<std::shared_ptr<WritableMappings::Mapping>> mapping =
          pool.mappings().Map(std::exchange(fd, -1), view.mapping_bytes());
      if (!mapping.ok()) return mapping.status();
      kept = *std::move(mapping);
      if (view.offset() + view.size_bytes() > kept->length()) {
        return absl::InternalError("a shard lies outside the memory file handed over");
      }
      base = kept->base() + view.offset();
    } else {
      const int64_t page = sysconf(_SC_PAGESIZE);
      const int64_t start = view.offset() / page * page;
      sealed.length = static_cast<size_t>(view.offset() - start + view.size_bytes());
      sealed.base = mmap(nullptr, sealed.length, PROT_READ, MAP_SHARED, fd, start);
      if (sealed.base == MAP_FAILED) {
        sealed.base = nullptr;
        return absl::ResourceExhaustedError(absl::StrCat("cannot map ", view.size_bytes(),
                                                         " bytes of shard ", view.shard_index(),
                                                         " read-only: ", std::strerror(errno)));
      }
      base = static_cast<const std::byte*>(sealed.base) + (view.offset() - start);
    }
    CopyBoxToArray(tensor.shape, boxes[k], element, base, array);
  }
  return absl::OkStatus();
}

}  // namespace

std::optional<absl::StatusOr<DownloadHeader>> DownloadInPlace(const Client& client,
                                                              const std::string& tensor_id,
                                                              absl::Span<uint8_t> out,
                                                              const DownloadSelection& selection,
                                                              const DownloadOptions& options) {
  const bool forced = options.path == TransferPath::kInPlace;
  const auto bytes = static_cast<int64_t>(out.size());
  if (selection.kind() != DownloadSelection::Kind::kWhole ||
      (!forced && (options.path != TransferPath::kAuto || bytes < kInPlaceMinBytes))) {
    return std::nullopt;
  }
  std::shared_ptr<RegionPool> pool = RegionPool::For(client);
  if (!forced && pool->in_place_declined()) return std::nullopt;
  absl::StatusOr<bool> same_host = pool->UseRegion(options.path, bytes);
  if (!same_host.ok()) return same_host.status();
  if (!*same_host) return std::nullopt;
  absl::StatusOr<std::string> socket = pool->SameHostSocket();
  if (!socket.ok()) return socket.status();

  placement::v1::ExportShardsRequest request;
  request.set_tensor_id(tensor_id);
  request.set_for_copy(true);
  absl::StatusOr<RedeemedExport> exported = ExportAndRedeem(client, *socket, request);
  if (!exported.ok()) {
    if (forced || !Declined(exported.status())) return exported.status();
    if (absl::IsUnimplemented(exported.status())) pool->DeclineInPlace();
    return std::nullopt;
  }
  const TensorInfo tensor = FromProto(exported->response.tensor());
  absl::StatusOr<int64_t> total = ExpectedBytes(tensor.dtype, tensor.shape);
  absl::Status status = total.status();
  bool elsewhere = false;
  if (status.ok() && !tensor.sharding.partial_axes.empty()) {
    elsewhere = true;
    status = absl::FailedPreconditionError(
        absl::StrCat("tensor '", tensor.id, "' is partial: download it through the stream"));
  } else if (status.ok() && *total > bytes) {
    status = absl::InvalidArgumentError(absl::StrCat(
        "output buffer holds ", bytes, " bytes; tensor ", tensor_id, " needs ", *total));
  } else if (status.ok()) {
    status = CopyOut(*pool, tensor, *exported, out, *total, &elsewhere);
  }
  for (int fd : exported->fds) {
    if (fd >= 0) close(fd);
  }
  Unexport(client, exported->response.export_().export_id()).IgnoreError();
  if (!status.ok()) {
    if (elsewhere && !forced) return std::nullopt;
    return status;
  }
  if (options.progress) options.progress(*total, *total);
  DownloadHeader header;
  header.dtype = tensor.dtype;
  header.shape = tensor.shape;
  header.total_bytes = *total;
  return header;
}

}  // namespace placement::client
