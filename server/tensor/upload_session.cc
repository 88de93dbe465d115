#include "server/tensor/upload_session.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/tensor/chunk_runs.h"
#include "server/tensor/spread_copy.h"

namespace placement::server {

absl::StatusOr<std::unique_ptr<UploadSession>> UploadSession::Start(TensorStore* store,
                                                                    TensorSpec spec,
                                                                    ResolvedSharding target) {
  RETURN_IF_ERROR(ValidateShape(spec.shape, spec.dtype));
  if (!target.sharding.partial_axes().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharding ", target.sharding.ToString(), " has partial_axes (",
        absl::StrJoin(target.sharding.partial_axes(), ", "),
        "); an upload carries the whole value, so its sharding cannot be partial (assemble "
        "per-device contributions with Assemble instead)"));
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> tensor,
      store->Allocate(spec.dtype, std::move(spec.shape), std::move(target.sharding),
                      std::move(target.mesh_id), std::move(spec.name), std::move(spec.owner)));
  tensor->partial_op = target.partial_op;
  return std::unique_ptr<UploadSession>(new UploadSession(store, std::move(tensor)));
}

UploadSession::UploadSession(TensorStore* store, std::unique_ptr<Tensor> tensor)
    : store_(store), tensor_(std::move(tensor)) {
  expected_bytes_ = tensor_->logical_bytes();
  boxes_.reserve(tensor_->shards.size());
  for (const Shard& shard : tensor_->shards) boxes_.push_back(shard.domain.box);
}

UploadSession::~UploadSession() = default;

absl::Status UploadSession::Write(absl::string_view bytes) {
  if (tensor_ == nullptr) {
    return absl::FailedPreconditionError("upload session is already committed or aborted");
  }
  const int64_t length = static_cast<int64_t>(bytes.size());
  if (length > expected_bytes_ - received_bytes_) {
    absl::Status error =
        absl::InvalidArgumentError(absl::StrCat("expected ", expected_bytes_, " bytes for ",
                                                TypedShapeToString(tensor_->dtype, tensor_->shape),
                                                ", got at least ", received_bytes_ + length));
    Abort();
    return error;
  }
  if (length == 0) return absl::OkStatus();
  DeviceBackend* backend = store_->backend();
  const int64_t begin = received_bytes_;
  // Large writes (same-host regions) are spread over threads, each slice
  // with its own run list; chunk-sized ones reuse scratch_.
  absl::Status status = SpreadOverThreads(begin, begin + length, [&](int64_t lo, int64_t hi) {
    std::vector<ByteRun> local;
    std::vector<ByteRun>* scratch = hi - lo == length ? &scratch_ : &local;
    return ForEachChunkRunBatch(
        tensor_->shape, DTypeSize(tensor_->dtype), boxes_, lo, hi, RunDirection::kChunkToBox,
        scratch, [&](size_t shard, absl::Span<const ByteRun> runs) {
          return backend->Write(bytes.data() + (lo - begin), *tensor_->shards[shard].buffer, runs);
        });
  });
  if (!status.ok()) {
    Abort();
    return status;
  }
  received_bytes_ += length;
  return absl::OkStatus();
}

absl::Status UploadSession::CheckComplete(absl::string_view label) const {
  if (tensor_ == nullptr) {
    return absl::FailedPreconditionError("upload session is already committed or aborted");
  }
  if (received_bytes_ != expected_bytes_) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", expected_bytes_, " bytes for ",
                     TypedShapeToString(tensor_->dtype, tensor_->shape), label.empty() ? "" : " (",
                     label, label.empty() ? "" : ")", ", got ", received_bytes_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Tensor>> UploadSession::Commit() {
  if (absl::Status status = CheckComplete(); !status.ok()) {
    Abort();
    return status;
  }
  return store_->Commit(std::move(tensor_));
}

void UploadSession::Abort() {
  tensor_.reset();
  boxes_.clear();
  scratch_.clear();
  scratch_.shrink_to_fit();
}

}  // namespace placement::server
