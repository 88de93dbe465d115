#include "server/tensor/download_plan.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/tensor/chunk_runs.h"
#include "server/tensor/spread_copy.h"

namespace placement::server {
namespace {

std::string ShardDevices(const Tensor& tensor) {
  return absl::StrCat("[",
                      absl::StrJoin(tensor.shards, ", ",
                                    [](std::string* out, const Shard& s) {
                                      absl::StrAppend(out, s.domain.device_id);
                                    }),
                      "]");
}

// Index order of pieces: lexicographic by the boxes' begins, then ends, then
// partial index.
bool PieceBefore(const ShardDomain& a, const ShardDomain& b) {
  for (size_t d = 0; d < a.box.size(); ++d) {
    if (a.box[d].begin != b.box[d].begin) return a.box[d].begin < b.box[d].begin;
  }
  for (size_t d = 0; d < a.box.size(); ++d) {
    if (a.box[d].end != b.box[d].end) return a.box[d].end < b.box[d].end;
  }
  return a.partial_index < b.partial_index;
}

bool SamePiece(const ShardDomain& a, const ShardDomain& b) {
  return a.box == b.box && a.partial_index == b.partial_index;
}

// Concatenation along dimension 0 when every piece agrees on the other
// dimensions; the flat element count otherwise.
Shape PiecesShape(const std::vector<ShardDomain>& pieces) {
  if (pieces.size() == 1) return pieces.front().shard_shape;
  const Shape& first = pieces.front().shard_shape;
  bool concatenates = !first.empty();
  int64_t rows = 0, elements = 0;
  for (const ShardDomain& piece : pieces) {
    elements += BoxNumElements(piece.box);
    if (!concatenates) continue;
    rows += piece.shard_shape[0];
    for (size_t d = 1; d < first.size(); ++d) concatenates &= piece.box[d] == pieces.front().box[d];
  }
  if (!concatenates) return {elements};
  Shape shape = first;
  shape[0] = rows;
  return shape;
}

}  // namespace

absl::StatusOr<std::unique_ptr<DownloadPlan>> DownloadPlan::Create(
    std::shared_ptr<const Tensor> tensor, const DownloadSelection& selection,
    DeviceBackend* backend, RemoteShards* remote) {
  std::unique_ptr<DownloadPlan> plan(new DownloadPlan(std::move(tensor), backend, remote));
  const Tensor& t = *plan->tensor_;
  const int64_t elem = DTypeSize(t.dtype);

  if (selection.kind == DownloadSelectionKind::kWhole) {
    if (!t.sharding.partial_axes().empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor '", t.id, "' is partial over axes (",
                       absl::StrJoin(t.sharding.partial_axes(), ", "),
                       "): its value is the reduction of ", t.sharding.NumPartials(),
                       " contributions; all-reduce it first, or download shards by device"));
    }
    for (size_t i = 0; i < t.shards.size(); ++i) {
      const ShardDomain& domain = t.shards[i].domain;
      if (domain.replica_id != 0 || BoxNumElements(domain.box) == 0) continue;
      // A replica on this daemon saves the trip.
      size_t source = i;
      for (size_t j = 0; j < t.shards.size() && !t.shards[source].local(); ++j) {
        if (t.shards[j].local() && t.shards[j].domain.box == domain.box) source = j;
      }
      plan->has_remote_ |= !t.shards[source].local();
      plan->gather_boxes_.push_back(domain.box);
      plan->gather_shards_.push_back(source);
    }
    plan->shape_ = t.shape;
    plan->total_bytes_ = t.logical_bytes();
    plan->streams_.resize(plan->gather_shards_.size());
    if (plan->has_remote_ && remote == nullptr) {
      return absl::FailedPreconditionError("shards of other daemons without a cluster");
    }
    return plan;
  }

  // Which devices are selected.
  std::vector<int64_t> devices;
  switch (selection.kind) {
    case DownloadSelectionKind::kDevice:
      devices = {selection.device_id};
      break;
    case DownloadSelectionKind::kDeviceSet:
      if (selection.device_ids.empty()) {
        return absl::InvalidArgumentError("devices.device_ids is empty; name at least one device");
      }
      devices = selection.device_ids;
      break;
    case DownloadSelectionKind::kProcess:
      for (const Shard& shard : t.shards) {
        if (shard.process_index == selection.process_index) {
          devices.push_back(shard.domain.device_id);
        }
      }
      if (devices.empty()) {
        return absl::NotFoundError(absl::StrCat("tensor '", t.id, "' has no shard on process ",
                                                selection.process_index,
                                                "; its shards are on devices ", ShardDevices(t)));
      }
      break;
    case DownloadSelectionKind::kWhole:
      break;
  }
  std::vector<std::pair<ShardDomain, size_t>> selected;
  for (int64_t device : devices) {
    auto it = std::find_if(t.shards.begin(), t.shards.end(),
                           [&](const Shard& s) { return s.domain.device_id == device; });
    if (it == t.shards.end()) {
      return absl::NotFoundError(absl::StrCat("tensor '", t.id, "' has no shard on device ", device,
                                              "; its shards are on devices ", ShardDevices(t)));
    }
    selected.emplace_back(it->domain, static_cast<size_t>(it - t.shards.begin()));
  }
  std::stable_sort(selected.begin(), selected.end(),
                   [](const auto& a, const auto& b) { return PieceBefore(a.first, b.first); });
  int64_t offset = 0;
  for (size_t i = 0; i < selected.size(); ++i) {
    if (i > 0 && SamePiece(selected[i].first, selected[i - 1].first)) continue;
    plan->pieces_.push_back(selected[i].first);
    plan->piece_shards_.push_back(selected[i].second);
    plan->piece_offsets_.push_back(offset);
    offset += BoxNumElements(selected[i].first.box) * elem;
  }
  plan->whole_ = false;
  plan->total_bytes_ = offset;
  plan->shape_ = PiecesShape(plan->pieces_);
  plan->streams_.resize(plan->pieces_.size());
  for (size_t shard : plan->piece_shards_) plan->has_remote_ |= !t.shards[shard].local();
  if (plan->has_remote_ && remote == nullptr) {
    return absl::FailedPreconditionError("shards of other daemons without a cluster");
  }
  return plan;
}

absl::Status DownloadPlan::Read(int64_t offset, int64_t length, char* dst) {
  if (offset < 0 || length < 0 || length > total_bytes_ - offset) {
    return absl::InvalidArgumentError(absl::StrCat("read of [", offset, ", ", offset + length,
                                                   ") is outside the ", total_bytes_,
                                                   "-byte download"));
  }
  if (length == 0) return absl::OkStatus();
  // Large reads (into same-host regions) are spread over threads, each slice
  // with its own run list; chunk-sized ones reuse scratch_.
  return SpreadOverThreads(offset, offset + length, [&](int64_t lo, int64_t hi) {
    std::vector<ByteRun> local;
    return ReadSlice(lo, hi - lo, dst + (lo - offset), hi - lo == length ? &scratch_ : &local);
  });
}

absl::Status DownloadPlan::ReadRuns(size_t source, size_t shard, const Box& box,
                                    absl::Span<const ByteRun> runs, char* dst) {
  const Shard& s = tensor_->shards[shard];
  if (s.local()) return backend_->Read(*s.buffer, dst, runs);
  if (streams_[source] == nullptr) {
    ASSIGN_OR_RETURN(streams_[source], remote_->OpenBox(*tensor_, s, box));
  }
  // The runs of one box come in increasing, back-to-back order: the
  // stream's order.
  for (const ByteRun& run : runs) {
    RETURN_IF_ERROR(streams_[source]->Read(dst + run.dst_offset, run.length));
  }
  return absl::OkStatus();
}

absl::Status DownloadPlan::ReadSlice(int64_t offset, int64_t length, char* dst,
                                     std::vector<ByteRun>* scratch) {
  const Tensor& t = *tensor_;
  if (whole_) {
    return ForEachChunkRunBatch(
        t.shape, DTypeSize(t.dtype), gather_boxes_, offset, offset + length,
        RunDirection::kBoxToChunk, scratch, [&](size_t i, absl::Span<const ByteRun> runs) {
          return ReadRuns(i, gather_shards_[i], t.shards[gather_shards_[i]].domain.box, runs, dst);
        });
  }
  const int64_t end = offset + length;
  for (size_t i = 0; i < pieces_.size(); ++i) {
    const Shard& shard = t.shards[piece_shards_[i]];
    const int64_t size = BoxNumElements(shard.domain.box) * DTypeSize(t.dtype);
    const int64_t start = piece_offsets_[i];
    const int64_t lo = std::max(offset, start);
    const int64_t hi = std::min(end, start + size);
    if (lo >= hi) continue;
    const ByteRun run{lo - start, lo - offset, hi - lo};
    RETURN_IF_ERROR(ReadRuns(i, piece_shards_[i], shard.domain.box, {&run, 1}, dst));
  }
  return absl::OkStatus();
}

}  // namespace placement::server
