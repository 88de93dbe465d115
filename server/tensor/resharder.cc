#include "server/tensor/resharder.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/tensor/box_cursor.h"
#include "server/tensor/chunk_runs.h"

namespace placement::server {
namespace {

// The source shards that hold one distinct box, in mesh order (replica 0
// first).
struct SourceBox {
  Box box;
  std::vector<size_t> shards;
};

std::vector<SourceBox> DistinctSourceBoxes(const Tensor& source) {
  std::vector<SourceBox> boxes;
  for (size_t i = 0; i < source.shards.size(); ++i) {
    const ShardDomain& domain = source.shards[i].domain;
    if (BoxNumElements(domain.box) == 0) continue;
    SourceBox* match = nullptr;
    for (SourceBox& b : boxes) {
      if (b.box == domain.box) {
        match = &b;
        break;
      }
    }
    if (match == nullptr) match = &boxes.emplace_back(SourceBox{domain.box, {}});
    match->shards.push_back(i);
  }
  return boxes;
}

}  // namespace

namespace {

// Copies `region` of a remote source shard into `dst` through a
// chunk-sized staging buffer.
absl::Status CopyRemoteRegion(RemoteShards* remote, DeviceBackend* backend, const Tensor& source,
                              const Shard& src, const Box& region, int64_t elem, Shard& dst) {
  constexpr int64_t kStagingBytes = int64_t{1} << 20;
  ASSIGN_OR_RETURN(std::unique_ptr<RemoteBoxStream> stream, remote->OpenBox(source, src, region));
  BoxCursor cursor(dst.domain.box, region, elem);
  std::vector<char> staging(static_cast<size_t>(std::min(kStagingBytes, cursor.total_bytes())));
  std::vector<ByteRun> runs;
  while (!cursor.done()) {
    runs.clear();
    const int64_t bytes = cursor.Next(kStagingBytes, /*buffer_is_source=*/false, &runs);
    RETURN_IF_ERROR(stream->Read(staging.data(), bytes));
    RETURN_IF_ERROR(backend->Write(staging.data(), *dst.buffer, runs));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tensor>> Reshard(TensorStore* store, const Tensor& source,
                                                const ResolvedSharding& target, std::string name,
                                                TensorOwner owner, RemoteShards* remote) {
  if (!source.sharding.partial_axes().empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tensor '", source.id, "' is partial over axes (",
                     absl::StrJoin(source.sharding.partial_axes(), ", "),
                     "); reduce it (all-reduce / reduce-scatter) before placing it elsewhere"));
  }
  if (!target.sharding.partial_axes().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("target ", target.sharding.ToString(),
                     " has partial axes; placing a tensor cannot make it partial"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> dest,
                   store->Allocate(source.dtype, source.shape, target.sharding, target.mesh_id,
                                   std::move(name), std::move(owner)));
  DeviceBackend* backend = store->backend();
  const int64_t elem = DTypeSize(source.dtype);
  const std::vector<SourceBox> sources = DistinctSourceBoxes(source);
  std::vector<ByteRun> runs;
  for (Shard& dst : dest->shards) {
    if (BoxNumElements(dst.domain.box) == 0 || !dst.local()) continue;
    for (const SourceBox& src_box : sources) {
      std::optional<Box> region = IntersectBoxes(src_box.box, dst.domain.box);
      if (!region) continue;
      // The replica on the destination's device, else one on this daemon,
      // else replica 0 wherever it is.
      size_t chosen = src_box.shards.front();
      for (size_t i : src_box.shards) {
        if (source.shards[i].local() && !source.shards[chosen].local()) chosen = i;
        if (source.shards[i].domain.device_id == dst.domain.device_id) {
          chosen = i;
          break;
        }
      }
      if (!source.shards[chosen].local()) {
        if (remote == nullptr) {
          return absl::FailedPreconditionError("shards of other daemons without a cluster");
        }
        RETURN_IF_ERROR(
            CopyRemoteRegion(remote, backend, source, source.shards[chosen], *region, elem, dst));
        continue;
      }
      const DeviceBuffer& src_buffer = *source.shards[chosen].buffer;
      absl::Status status;
      runs.clear();
      ForEachCopyRun(*region, src_box.box, dst.domain.box, elem,
                     [&](int64_t src_offset, int64_t dst_offset, int64_t length) {
                       if (!status.ok()) return;
                       runs.push_back(ByteRun{src_offset, dst_offset, length});
                       if (runs.size() == kMaxRunsPerBatch) {
                         status = backend->Copy(src_buffer, *dst.buffer, runs);
                         runs.clear();
                       }
                     });
      if (status.ok() && !runs.empty()) status = backend->Copy(src_buffer, *dst.buffer, runs);
      if (!status.ok()) return status;  // `dest` is freed here
    }
  }
  return dest;
}

}  // namespace placement::server
