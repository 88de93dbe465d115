// TensorClient::Download read in place (tensors_inplace.h).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/src/box_copy.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/parallel_copy.h"
#include "client/src/piece_progress.h"
#include "client/src/region_pool.h"
#include "client/src/shard_export.h"
#include "client/src/tensors_inplace.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/views.h"
#include "placement/v1/view_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
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
                     absl::Span<uint8_t> out, int64_t total, PieceProgress& progress,
                     bool* elsewhere) {
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
    if (view.offset() < 0 || view.size_bytes() != BoxBytes(tensor.shape, ranges, element)) {
      return absl::InternalError(absl::StrCat("the daemon's view of shard ", index, " (",
                                              view.size_bytes(), " bytes at offset ", view.offset(),
                                              ") does not fit its box"));
    }
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
    const int fd = exported.fds[view.fd_index()];
    std::shared_ptr<WritableMappings::Mapping> kept;
    SealedMapping sealed;
    const std::byte* base = nullptr;
    absl::StatusOr<std::shared_ptr<WritableMappings::Mapping>> mapping =
        view.writable() ? pool.mappings().Map(fd, view.mapping_bytes())
                        : absl::PermissionDeniedError("sealed");
    // Sealed (a view sealed it since it was handed over): read-only.
    if (!mapping.ok() && !absl::IsPermissionDenied(mapping.status())) return mapping.status();
    if (mapping.ok()) {
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
    CopyBoxToArray(tensor.shape, boxes[k], element, base, array,
                   [&progress](std::byte* to, const std::byte* from, size_t n) {
                     progress.Copy(to, from, n, [](std::byte* t, const std::byte* f, size_t m) {
                       ParallelCopy(t, f, m);
                     });
                   });
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
  if (selection.kind() != DownloadSelection::Kind::kWhole) return std::nullopt;
  auto route = RouteInPlace(client, options.path, bytes);
  if (!route.has_value()) return std::nullopt;
  if (!route->ok()) return route->status();
  const std::shared_ptr<RegionPool>& pool = (*route)->pool;
  const std::string& socket = (*route)->socket;

  placement::v1::ExportShardsRequest request;
  request.set_tensor_id(tensor_id);
  request.set_for_copy(true);
  absl::StatusOr<RedeemedExport> exported = ExportAndRedeem(client, socket, request);
  if (!exported.ok()) {
    if (forced || !InPlaceDeclined(exported.status())) return exported.status();
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
    PieceProgress progress(options.progress, *total);
    status = CopyOut(*pool, tensor, *exported, out, *total, progress, &elsewhere);
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
