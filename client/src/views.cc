// TensorView (ViewService): export, fd hand-over on the region socket,
// read-only mappings.
#include "placement/client/views.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/src/box_copy.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "client/src/region_pool.h"
#include "client/src/shard_export.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/client/tensors.h"
#include "placement/v1/view_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
absl::Status Unexport(const Client& client, const std::string& export_id) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::UnexportRequest request;
  request.set_export_id(export_id);
  pb::UnexportResponse response;
  return FromGrpcStatus(
      pb::ViewService::NewStub(client.impl().channel)->Unexport(&context, request, &response));
}

absl::StatusOr<ExportList> ListExports(const Client& client) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::ListExportsResponse response;
  grpc::Status status =
      pb::ViewService::NewStub(client.impl().channel)->ListExports(&context, {}, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  ExportList out;
  for (const pb::ExportInfo& e : response.exports()) {
    out.exports.push_back(ExportInfo{e.export_id(), e.tensor_id(), e.tenant(), e.session_id(),
                                     e.num_shards(), e.size_bytes(), e.reader_pid()});
  }
  out.exports_total = response.exports_total();
  out.bytes_total = response.bytes_total();
  return out;
}

absl::StatusOr<std::unique_ptr<TensorView>> TensorView::Open(const Client& client,
                                                             const std::string& tensor_id,
                                                             const ViewOptions& options) {
  absl::StatusOr<std::string> socket = RegionPool::For(client)->SameHostSocket();
  if (!socket.ok()) return socket.status();
  if (socket->empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the daemon at ", client.target(),
        " does not share this host (host/boot id, a unix or loopback target, a region socket); "
        "views need a same-host daemon: download instead"));
  }
  pb::ExportShardsRequest request;
  request.set_tensor_id(tensor_id);
  for (int32_t i : options.shard_indices) request.add_shard_indices(i);
  absl::StatusOr<RedeemedExport> exported = ExportAndRedeem(client, *socket, request);
  if (!exported.ok()) return exported.status();
  const pb::ExportShardsResponse& response = exported->response;
  std::vector<int>* fds = &exported->fds;
  // From here on, destroying `view` unexports.
  std::unique_ptr<TensorView> view(
      new TensorView(client, FromProto(response.tensor()), response.export_().export_id()));
  absl::Status mapped = absl::OkStatus();
  for (const pb::ShardView& shard : response.shards()) {
    Shard out;
    out.index = shard.shard_index();
    if (shard.shard_index() >= 0 &&
        shard.shard_index() < static_cast<int32_t>(view->tensor_.shards.size())) {
      out.info = view->tensor_.shards[shard.shard_index()];
    }
    out.copied = shard.copied();
    out.cuda_ipc_handle = shard.cuda_ipc_handle();
    out.offset = shard.offset();
    const int32_t k = shard.fd_index();
    if (k >= 0 && mapped.ok()) {
      if (k >= static_cast<int32_t>(fds->size())) {
        mapped = absl::InternalError(absl::StrCat("shard ", out.index, " names fd ", k, " of ",
                                                  fds->size(), " handed over"));
        continue;
      }
      // Page-aligned start; PROT_READ of an O_RDONLY fd of sealed memory.
      const int64_t page = sysconf(_SC_PAGESIZE);
      const int64_t start = shard.offset() / page * page;
      const auto length = static_cast<size_t>(shard.offset() - start + shard.size_bytes());
      void* base = mmap(nullptr, length, PROT_READ, MAP_SHARED, (*fds)[k], start);
      if (base == MAP_FAILED) {
        mapped = absl::ResourceExhaustedError(
            absl::StrCat("cannot map shard ", out.index, " (", shard.size_bytes(),
                         " bytes) read-only: ", std::strerror(errno)));
        continue;
      }
      // Map the daemon's 2 MiB pages whole where it has them (a no-op
      // otherwise): one fault per 2 MiB on the first read.
      (void)madvise(base, length, MADV_HUGEPAGE);
      view->mappings_.push_back({base, length});
      out.bytes =
          std::span<const std::byte>(static_cast<const std::byte*>(base) + (shard.offset() - start),
                                     static_cast<size_t>(shard.size_bytes()));
    }
    view->shards_.push_back(std::move(out));
  }
  for (int fd : *fds) close(fd);  // the mappings keep the memory
  if (!mapped.ok()) return mapped;
  return view;
}

TensorView::~TensorView() { Close().IgnoreError(); }

int64_t TensorView::size_bytes() const {
  int64_t total = 0;
  for (const Shard& shard : shards_) total += shard.info.size_bytes;
  return total;
}

absl::Status TensorView::CopyTo(std::span<std::byte> out) const {
  absl::StatusOr<int64_t> total = ExpectedBytes(tensor_.dtype, tensor_.shape);
  if (!total.ok()) return total.status();
  if (static_cast<int64_t>(out.size()) < *total) {
    return absl::InvalidArgumentError(absl::StrCat("CopyTo: ", out.size(), " bytes of room for ",
                                                   *total, " bytes of ",
                                                   DescribeArray(tensor_.dtype, tensor_.shape)));
  }
  if (!tensor_.sharding.partial_axes.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", tensor_.id,
                     "' is partial: its shards are contributions to reduce, not the array"));
  }
  if (!open_) return absl::FailedPreconditionError("CopyTo on a closed view");
  const int64_t element = ElementSize(tensor_.dtype);
  const size_t rank = tensor_.shape.size();
  int64_t covered = 0;
  std::vector<std::vector<IndexRange>> done;
  for (const Shard& shard : shards_) {
    const std::vector<IndexRange>& ranges = shard.info.ranges;
    if (ranges.size() != rank || shard.info.shape.size() != rank ||
        std::find(done.begin(), done.end(), ranges) != done.end()) {
      continue;
    }
    int64_t elements = 1;
    for (size_t d = 0; d < rank; ++d) {
      elements *= std::max<int64_t>(std::min(ranges[d].end, tensor_.shape[d]) - ranges[d].begin, 0);
    }
    if (elements == 0 && rank > 0) continue;
    if (shard.bytes.size() < static_cast<size_t>(elements * element)) continue;  // CUDA
    done.push_back(ranges);
    covered += CopyBoxToArray(tensor_.shape, ranges, element, shard.bytes.data(), out.data());
  }
  if (covered < *total) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the viewed shards hold ", covered, " of the ", *total, " bytes of tensor '", tensor_.id,
        "' (others are on other nodes, on a GPU, or not selected); download instead"));
  }
  return absl::OkStatus();
}

absl::Status TensorView::Close() {
  if (!open_) return absl::OkStatus();
  open_ = false;
  for (const Mapping& m : mappings_) munmap(m.base, m.length);
  mappings_.clear();
  for (Shard& shard : shards_) shard.bytes = {};
  return Unexport(client_, export_id_);
}

absl::StatusOr<std::unique_ptr<TensorView>> TensorClient::View(const std::string& tensor_id,
                                                               const ViewOptions& options) const {
  return TensorView::Open(client_, tensor_id, options);
}

}  // namespace placement::client
