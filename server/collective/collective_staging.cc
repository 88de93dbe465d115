#include "server/collective/collective_staging.h"

#include "common/region.h"
#include "common/status_macros.h"

namespace placement::server {

std::vector<DeviceBuffer*> StagingBuffers::pointers() const {
  std::vector<DeviceBuffer*> out;
  for (const auto& b : buffers) out.push_back(b.get());
  return out;
}

std::vector<const DeviceBuffer*> StagingBuffers::const_pointers() const {
  std::vector<const DeviceBuffer*> out;
  for (const auto& b : buffers) out.push_back(b.get());
  return out;
}

absl::StatusOr<StagingBuffers> AllocateStaging(DeviceBackend* backend, const Tensor& like) {
  StagingBuffers staging;
  for (const Shard& shard : like.shards) {
    if (!shard.local()) {  // another daemon's device: it stages its own
      staging.buffers.push_back(nullptr);
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceBuffer> buffer,
                     backend->Allocate(shard.domain.device_id, shard.buffer->size()));
    staging.buffers.push_back(std::move(buffer));
  }
  return staging;
}

absl::Status UnpackGathered(DeviceBackend* backend, const CollectivePlan& plan, const Tensor& input,
                            const StagingBuffers& staging, Tensor* result) {
  const int64_t elem = DTypeSize(input.dtype);
  for (const std::vector<int64_t>& group : plan.groups) {
    const int64_t block = BoxNumElements(input.shards[group[0]].domain.box) * elem;
    for (int64_t position : group) {
      if (!result->shards[position].local()) continue;
      std::vector<ByteRun> runs;
      const Box& united = result->shards[position].domain.box;
      for (size_t j = 0; j < group.size(); ++j) {
        const Box& piece = input.shards[group[j]].domain.box;
        const int64_t base = static_cast<int64_t>(j) * block;
        ForEachCopyRun(piece, piece, united, elem, [&](int64_t src, int64_t dst, int64_t len) {
          runs.push_back(ByteRun{base + src, dst, len});
        });
      }
      RETURN_IF_ERROR(
          backend->Copy(*staging.buffers[position], *result->shards[position].buffer, runs));
    }
  }
  return absl::OkStatus();
}

absl::Status PackForScatter(DeviceBackend* backend, const CollectivePlan& plan, const Tensor& input,
                            const Tensor& result, StagingBuffers* staging) {
  const int64_t elem = DTypeSize(input.dtype);
  for (const std::vector<int64_t>& group : plan.groups) {
    const int64_t block = BoxNumElements(result.shards[group[0]].domain.box) * elem;
    for (int64_t position : group) {
      if (!input.shards[position].local()) continue;
      std::vector<ByteRun> runs;
      const Box& whole = input.shards[position].domain.box;
      for (size_t j = 0; j < group.size(); ++j) {
        const Box& piece = result.shards[group[j]].domain.box;
        const int64_t base = static_cast<int64_t>(j) * block;
        ForEachCopyRun(piece, whole, piece, elem, [&](int64_t src, int64_t dst, int64_t len) {
          runs.push_back(ByteRun{src, base + dst, len});
        });
      }
      RETURN_IF_ERROR(
          backend->Copy(*input.shards[position].buffer, *staging->buffers[position], runs));
    }
  }
  return absl::OkStatus();
}

}  // namespace placement::server
