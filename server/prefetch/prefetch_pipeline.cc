#include "server/prefetch/prefetch_pipeline.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/tensor/label_limits.h"

namespace placement::server {

PrefetchPipeline::PrefetchPipeline(const TensorOps* ops, PrefetchConfig config,
                                   PrefetchMetrics* metrics)
    : ops_(ops), config_(std::move(config)), metrics_(metrics) {}

PrefetchPipeline::~PrefetchPipeline() { Close(); }

absl::Status PrefetchPipeline::InBatch(int64_t sequence, const absl::Status& status) {
  return absl::Status(status.code(), absl::StrCat("batch ", sequence, ": ", status.message()));
}

absl::Status PrefetchPipeline::OnBatchHeader(const PrefetchBatchHeader& header) {
  if (input_done_ || closed_) {
    return absl::FailedPreconditionError("a batch arrived after the stream ended");
  }
  if (receiving_ != nullptr) {
    // The previous batch is short: its commit names the array and the numbers.
    RETURN_IF_ERROR(CommitReceiving());
  }
  const int64_t sequence = next_sequence_;
  if (held() >= config_.buffer_size) {
    return absl::FailedPreconditionError(absl::StrCat(
        "batch ", sequence, " arrived while ", held(), " batches are held (buffer_size ",
        config_.buffer_size, "); release a batch before sending the next one"));
  }
  if (!header.arrays.ok()) return InBatch(sequence, header.arrays.status());
  const std::vector<BatchArraySpec>& arrays = *header.arrays;
  int64_t expected = 0;
  for (const BatchArraySpec& array : arrays) expected += ByteSize(array.dtype, array.shape);
  // The header's own name and owner were checked with it (from_proto); a
  // name made from the stream's may still be too long.
  std::string name = header.name;
  if (name.empty() && !config_.name.empty()) {
    name = absl::StrCat(config_.name, "/", sequence);
    if (absl::Status s = CheckLength("its name (open.name/<batch>)", name, kMaxTensorNameLength);
        !s.ok()) {
      return InBatch(sequence, s);
    }
  }
  const PlacementRule& rule = IsDefaultRule(header.rule) ? config_.rule : header.rule;
  absl::StatusOr<std::unique_ptr<BatchUploadSession>> session =
      ops_->StartBatchUpload(arrays, rule, name, TensorOwner(config_.tenant, header.owner));
  if (!session.ok()) return InBatch(sequence, session.status());

  const absl::Time now = absl::Now();
  ++next_sequence_;
  receiving_ = std::move(*session);
  receiving_expected_ = expected;
  receiving_bytes_ = 0;
  if (metrics_ != nullptr) metrics_->BatchAdmitted();
  stats_.max_batches_held = std::max(stats_.max_batches_held, held());
  UpdateBlockedClock(now);
  if (expected == 0) return CommitReceiving();
  return absl::OkStatus();
}

absl::Status PrefetchPipeline::OnBatchChunk(int64_t array_index, absl::string_view data) {
  if (receiving_ == nullptr) {
    if (next_sequence_ == 0) {
      return absl::InvalidArgumentError("a chunk arrived before the first batch header");
    }
    return absl::InvalidArgumentError(
        absl::StrCat("a chunk of ", data.size(), " bytes arrived after batch ", next_sequence_ - 1,
                     " was complete; send a batch header first"));
  }
  const int64_t sequence = next_sequence_ - 1;
  if (absl::Status s = receiving_->Write(array_index, data); !s.ok()) {
    receiving_.reset();
    if (metrics_ != nullptr) metrics_->BatchFreed(0);
    return InBatch(sequence, s);
  }
  receiving_bytes_ += static_cast<int64_t>(data.size());
  if (receiving_bytes_ == receiving_expected_) return CommitReceiving();
  return absl::OkStatus();
}

absl::Status PrefetchPipeline::CommitReceiving() {
  const int64_t sequence = next_sequence_ - 1;
  std::unique_ptr<BatchUploadSession> session = std::move(receiving_);
  auto committed = session->Commit();
  if (!committed.ok()) {
    if (metrics_ != nullptr) metrics_->BatchFreed(0);
    return InBatch(sequence, committed.status());
  }
  StagedBatch batch;
  for (auto& [key, tensor] : *committed) {
    batch.device_bytes += tensor->device_bytes();
    batch.ids.push_back(tensor->id);
  }
  batch.tensors = std::move(*committed);
  ++stats_.batches_staged;
  stats_.bytes_staged += batch.device_bytes;
  if (metrics_ != nullptr) metrics_->BatchStaged(batch.device_bytes);
  staged_.emplace(sequence, std::move(batch));
  return absl::OkStatus();
}

absl::Status PrefetchPipeline::OnRelease(int64_t sequence) {
  if (sequence < 0 || sequence >= next_sequence_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "release.sequence ", sequence, ": no such batch (", next_sequence_, " batches were sent)"));
  }
  if (sequence >= next_delivery_) {
    return absl::FailedPreconditionError(
        absl::StrCat("release.sequence ", sequence, ": the batch has not been delivered yet"));
  }
  auto it = staged_.find(sequence);
  if (it == staged_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("release.sequence ", sequence, ": the batch was already released"));
  }
  Free(it->second);
  staged_.erase(it);
  UpdateBlockedClock(absl::Now());
  return absl::OkStatus();
}

absl::Status PrefetchPipeline::OnNext() {
  const int64_t n = nexts_;
  if (n > next_delivery_) {
    return absl::FailedPreconditionError(absl::StrCat("next #", n, " asks for batch ", n,
                                                      " before batch ", n - 1, " was delivered"));
  }
  ++nexts_;
  if (n == next_delivery_) asked_at_ = absl::Now();
  if (config_.auto_release && n >= 1) {
    auto it = staged_.find(n - 1);
    if (it != staged_.end()) {  // else released explicitly already
      Free(it->second);
      staged_.erase(it);
      UpdateBlockedClock(absl::Now());
    }
  }
  return absl::OkStatus();
}

absl::Status PrefetchPipeline::OnInputDone() {
  if (receiving_ != nullptr) RETURN_IF_ERROR(CommitReceiving());
  input_done_ = true;
  UpdateBlockedClock(absl::Now());
  return absl::OkStatus();
}

std::optional<PrefetchOutput> PrefetchPipeline::TakeOutput() {
  if (closed_ || stats_taken_) return std::nullopt;
  auto it = staged_.find(next_delivery_);
  if (it != staged_.end()) {
    const absl::Time now = absl::Now();
    StagedBatch& batch = it->second;
    PrefetchOutput out;
    out.ready.emplace();
    out.ready->sequence = next_delivery_;
    out.ready->tensors = std::move(batch.tensors);
    batch.tensors.clear();
    ++next_delivery_;
    if (asked_at_.has_value()) {
      absl::Duration stall = now - *asked_at_;
      stats_.consumer_stall += stall;
      if (metrics_ != nullptr) metrics_->ConsumerStall(stall);
      asked_at_.reset();
    }
    return out;
  }
  if (input_done_ && receiving_ == nullptr && next_delivery_ == next_sequence_) {
    stats_taken_ = true;
    PrefetchOutput out;
    out.stats = Stats(absl::Now());
    return out;
  }
  return std::nullopt;
}

void PrefetchPipeline::Free(StagedBatch& batch) {
  batch.tensors.clear();
  if (!batch.ids.empty() && !ops_->store()->Delete(batch.ids).ok()) {
    // Someone deleted some of them through TensorService: free the rest.
    for (const std::string& id : batch.ids) ops_->store()->Delete({id}).IgnoreError();
  }
  batch.ids.clear();
  if (metrics_ != nullptr) metrics_->BatchFreed(batch.device_bytes);
}

void PrefetchPipeline::Close() {
  if (closed_) return;
  const absl::Time now = absl::Now();
  input_done_ = true;
  UpdateBlockedClock(now);
  closed_ = true;
  if (receiving_ != nullptr) {
    receiving_.reset();
    if (metrics_ != nullptr) metrics_->BatchFreed(0);
  }
  for (auto& [sequence, batch] : staged_) Free(batch);
  staged_.clear();
}

void PrefetchPipeline::UpdateBlockedClock(absl::Time now) {
  const bool full = !input_done_ && held() >= config_.buffer_size;
  if (full && !full_since_.has_value()) {
    full_since_ = now;
  } else if (!full && full_since_.has_value()) {
    absl::Duration blocked = now - *full_since_;
    stats_.producer_blocked += blocked;
    if (metrics_ != nullptr) metrics_->ProducerBlocked(blocked);
    full_since_.reset();
  }
}

PrefetchStats PrefetchPipeline::Stats(absl::Time now) const {
  PrefetchStats stats = stats_;
  if (full_since_.has_value()) stats.producer_blocked += now - *full_since_;
  return stats;
}

}  // namespace placement::server
