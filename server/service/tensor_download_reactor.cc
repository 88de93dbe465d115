#include "server/service/tensor_download_reactor.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/shape.h"
#include "common/status_macros.h"
#include "server/service/from_proto.h"
#include "server/service/region_slices.h"
#include "server/service/to_proto.h"
#include "server/tensor/tenant_access.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

// Room for the message framing, so a full chunk fits a 4 MiB message limit.
constexpr int64_t kFramingAllowance = 1024;

}  // namespace

DownloadReactor::DownloadReactor(grpc::CallbackServerContext* context, const TensorOps* ops,
                                 CallGate* gate, const pb::DownloadRequest& request,
                                 RegionRegistry* regions) {
  absl::StatusOr<Caller> caller = gate->Admit(*context, &ticket_);
  absl::Status status = caller.status();
  if (status.ok()) {
    absl::StatusOr<StreamRegistry::Lease> lease =
        gate->OpenStream(*caller, context, StreamKind::kDownload);
    status = lease.status();
    if (lease.ok()) lease_ = *std::move(lease);
  }
  if (status.ok()) status = Open(ops, *caller, request, regions);
  if (!status.ok()) {
    Fail(status);
    return;
  }
  StartWrite(&response_);
}

absl::Status DownloadReactor::Open(const TensorOps* ops, const Caller& caller,
                                   const pb::DownloadRequest& request, RegionRegistry* regions) {
  ASSIGN_OR_RETURN(int64_t chunk, ChunkSizeFromProto(request.chunk_size_bytes()));
  chunk_bytes_ = std::min(chunk, kMaxChunkBytes - kFramingAllowance);
  ASSIGN_OR_RETURN(std::string id,
                   ResolveTensorId(*ops->store(), caller, request.tensor_id(), "tensor_id"));
  ASSIGN_OR_RETURN(plan_, ops->OpenDownload(id, DownloadSelectionFromProto(request)));
  lease_.Describe(
      absl::StrCat(request.tensor_id(), " ", TypedShapeToString(plan_->dtype(), plan_->shape())),
      plan_->total_bytes());
  pb::DownloadHeader* header = response_.mutable_header();
  header->set_dtype(static_cast<pb::DType>(static_cast<int>(plan_->dtype())));
  for (int64_t d : plan_->shape()) header->add_shape(d);
  header->set_total_bytes(plan_->total_bytes());
  for (size_t i = 0; i < plan_->pieces().size(); ++i) {
    ShardToProto(plan_->pieces()[i], plan_->dtype(), plan_->piece_process(i), header->add_pieces());
  }
  if (request.has_destination()) return CopyToRegion(caller, request.destination(), regions);
  return absl::OkStatus();
}

absl::Status DownloadReactor::CopyToRegion(const Caller& caller, const pb::RegionSlice& destination,
                                           RegionRegistry* regions) {
  const int64_t total = plan_->total_bytes();
  if (destination.size() > 0 && destination.size() < total) {
    return absl::OutOfRangeError(absl::StrCat("destination.size ", destination.size(),
                                              " is less than the ", total,
                                              " bytes of the download"));
  }
  // The whole room offered is bounds-checked (a destination.size past the
  // region's end is OUT_OF_RANGE even when the download itself would fit);
  // size 0 offers exactly the download's bytes. Negative sizes are refused
  // by the bounds check.
  pb::RegionSlice slice = destination;
  if (destination.size() == 0) slice.set_size(total);
  ASSIGN_OR_RETURN(RegionBytes bytes,
                   AcquireRegionSlice(regions, caller, "destination", slice, RegionAccess::kWrite,
                                      /*used=*/total));
  RETURN_IF_ERROR(bytes.WriteFrom(
      [&](int64_t offset, int64_t length, char* dst) { return plan_->Read(offset, length, dst); }));
  offset_ = total;
  lease_.Progress(total);
  return absl::OkStatus();
}

void DownloadReactor::Fail(const absl::Status& status) {
  plan_.reset();
  Finish(ToGrpcStatus(status));
}

void DownloadReactor::OnWriteDone(bool ok) {
  if (ok)
    lease_.Progress(response_.has_chunk() ? static_cast<int64_t>(response_.chunk().size()) : 0);
  if (!ok) {
    Fail(absl::CancelledError("download stream broken (client cancelled or disconnected)"));
    return;
  }
  if (offset_ == plan_->total_bytes()) {
    plan_.reset();
    Finish(grpc::Status::OK);
    return;
  }
  const int64_t length = std::min(chunk_bytes_, plan_->total_bytes() - offset_);
  std::string* chunk = response_.mutable_chunk();
  chunk->resize(static_cast<size_t>(length));
  absl::Status status = plan_->Read(offset_, length, chunk->data());
  if (!status.ok()) {
    Fail(status);
    return;
  }
  offset_ += length;
  StartWrite(&response_);
}

}  // namespace placement::server
