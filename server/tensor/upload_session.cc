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
                                                                    ResolvedSharding target,
                                                                    RemoteShards* remote) {
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
  std::unique_ptr<RemoteShardWriter> writer;
  if (!tensor->all_local()) {
    if (remote == nullptr) {
      return absl::FailedPreconditionError("the target has devices of other daemons");
    }
    tensor->id = remote->NewId();
    ASSIGN_OR_RETURN(writer, remote->StartWrite(*tensor));
  }
  return std::unique_ptr<UploadSession>(
      new UploadSession(store, std::move(tensor), std::move(writer)));
}

UploadSession::UploadSession(TensorStore* store, std::unique_ptr<Tensor> tensor,
                             std::unique_ptr<RemoteShardWriter> writer)
    : store_(store), tensor_(std::move(tensor)), writer_(std::move(writer)) {
  stream_shape_ = tensor_->shape;
  expected_bytes_ = tensor_->logical_bytes();
  for (size_t i = 0; i < tensor_->shards.size(); ++i) {
    const Shard& shard = tensor_->shards[i];
    if (BoxNumElements(shard.domain.box) == 0) continue;
    if (shard.local()) {
      boxes_.push_back(shard.domain.box);
      targets_.push_back(Target{static_cast<int64_t>(i), -1, {}});
      continue;
    }
    // Replicas on one daemon get the bytes once over the wire.
    bool merged = false;
    for (size_t t = 0; t < targets_.size() && !merged; ++t) {
      if (targets_[t].process == shard.process_index && boxes_[t] == shard.domain.box) {
        targets_[t].device_ids.push_back(shard.domain.device_id);
        merged = true;
      }
    }
    if (!merged) {
      boxes_.push_back(shard.domain.box);
      targets_.push_back(Target{-1, shard.process_index, {shard.domain.device_id}});
    }
  }
}

absl::StatusOr<std::unique_ptr<UploadSession>> UploadSession::StartProcessLocal(
    TensorStore* store, TensorSpec spec, ResolvedSharding target, const LocalDataLayout& layout,
    RemoteShards* remote, const ProcessLocalRequest& request) {
  RETURN_IF_ERROR(ValidateShape(spec.shape, spec.dtype));
  RETURN_IF_ERROR(ValidateShape(layout.local_shape, spec.dtype));
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> tensor,
      store->Allocate(spec.dtype, std::move(spec.shape), std::move(target.sharding),
                      std::move(target.mesh_id), std::move(spec.name), std::move(spec.owner)));
  tensor->partial_op = target.partial_op;
  ASSIGN_OR_RETURN(std::unique_ptr<ProcessLocalCommit> commit,
                   remote->BeginProcessLocal(*tensor, request));
  return std::unique_ptr<UploadSession>(
      new UploadSession(store, std::move(tensor), layout, std::move(commit)));
}

UploadSession::UploadSession(TensorStore* store, std::unique_ptr<Tensor> tensor,
                             const LocalDataLayout& layout,
                             std::unique_ptr<ProcessLocalCommit> commit)
    : store_(store), tensor_(std::move(tensor)), process_local_(std::move(commit)) {
  stream_shape_ = layout.local_shape;
  expected_bytes_ = ByteSize(tensor_->dtype, stream_shape_);
  for (const ProcessLocalShard& piece : layout.shards) {
    if (BoxNumElements(piece.local_box) == 0) continue;
    boxes_.push_back(piece.local_box);
    targets_.push_back(Target{piece.mesh_position, -1, {}});
  }
}

UploadSession::~UploadSession() {
  if (writer_ != nullptr) writer_->Abort();
  if (process_local_ != nullptr) {
    process_local_->Abort(absl::AbortedError("the upload ended before it was complete"));
  }
}

absl::Status UploadSession::Write(absl::string_view bytes) {
  if (tensor_ == nullptr) {
    return absl::FailedPreconditionError("upload session is already committed or aborted");
  }
  const int64_t length = static_cast<int64_t>(bytes.size());
  if (length > expected_bytes_ - received_bytes_) {
    absl::Status error =
        absl::InvalidArgumentError(absl::StrCat("expected ", expected_bytes_, " bytes for ",
                                                TypedShapeToString(tensor_->dtype, stream_shape_),
                                                ", got at least ", received_bytes_ + length));
    Abort();
    return error;
  }
  if (length == 0) return absl::OkStatus();
  DeviceBackend* backend = store_->backend();
  const int64_t begin = received_bytes_;
  auto write_slice = [&](int64_t lo, int64_t hi, std::vector<ByteRun>* scratch) {
    return ForEachChunkRunBatch(
        stream_shape_, DTypeSize(tensor_->dtype), boxes_, lo, hi, RunDirection::kChunkToBox,
        scratch, [&](size_t t, absl::Span<const ByteRun> runs) {
          const Target& target = targets_[t];
          const char* chunk = bytes.data() + (lo - begin);
          if (target.shard >= 0) {
            return backend->Write(chunk, *tensor_->shards[target.shard].buffer, runs);
          }
          return writer_->Write(target.process, target.device_ids, runs, chunk);
        });
  };
  // Large writes (same-host regions) are spread over threads, each slice
  // with its own run list; chunk-sized ones reuse scratch_. Remote streams
  // take their bytes in order, on this thread.
  absl::Status status = writer_ != nullptr
                            ? write_slice(begin, begin + length, &scratch_)
                            : SpreadOverThreads(begin, begin + length, [&](int64_t lo, int64_t hi) {
                                std::vector<ByteRun> local;
                                return write_slice(lo, hi, hi - lo == length ? &scratch_ : &local);
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
                     TypedShapeToString(tensor_->dtype, stream_shape_), label.empty() ? "" : " (",
                     label, label.empty() ? "" : ")", ", got ", received_bytes_));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Tensor>> UploadSession::CommitWrittenInPlace() {
  if (received_bytes_ != 0) {
    Abort();
    return absl::FailedPreconditionError(absl::StrCat(
        "an upload written in place also received ", received_bytes_, " bytes through its stream"));
  }
  received_bytes_ = expected_bytes_;
  return Commit();
}

absl::StatusOr<std::shared_ptr<const Tensor>> UploadSession::Commit() {
  if (absl::Status status = CheckComplete(); !status.ok()) {
    Abort();
    return status;
  }
  if (writer_ != nullptr) {
    absl::StatusOr<std::shared_ptr<const Tensor>> committed = writer_->Commit(std::move(tensor_));
    writer_.reset();
    return committed;
  }
  if (process_local_ != nullptr) {
    absl::StatusOr<std::shared_ptr<const Tensor>> committed =
        process_local_->Commit(std::move(tensor_));
    process_local_.reset();
    return committed;
  }
  return store_->Commit(std::move(tensor_));
}

void UploadSession::Abort() {
  if (writer_ != nullptr) writer_->Abort();
  if (process_local_ != nullptr) {
    process_local_->Abort(absl::AbortedError("its upload stream failed"));
    process_local_.reset();
  }
  tensor_.reset();
  boxes_.clear();
  scratch_.clear();
  scratch_.shrink_to_fit();
}

}  // namespace placement::server
