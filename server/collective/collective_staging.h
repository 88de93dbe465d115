// Staging for all-gather and reduce-scatter along a dimension whose blocks
// are not contiguous in a shard (any dimension after one the shard holds
// more than one index of): engines move contiguous blocks (NCCL / MPI
// semantics), so the blocks are gathered into, or packed from, one staging
// buffer per device, laid out rank by rank, and copied to / from the shard
// boxes with DeviceBackend::Copy runs. Staging buffers are allocated through
// the backend (they count against the device budgets while they live) and
// freed when the StagingBuffers object dies.
//
// Functions are thread-compatible: they touch only the buffers passed in.
#ifndef PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_STAGING_H_
#define PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_STAGING_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "server/collective/collective_plan.h"
#include "server/device/device_backend.h"
#include "server/tensor/tensor.h"

namespace placement::server {

// One buffer per mesh position (null for another daemon's device).
struct StagingBuffers {
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;

  std::vector<DeviceBuffer*> pointers() const;
  std::vector<const DeviceBuffer*> const_pointers() const;
};

// A buffer on every shard's device, as large as that shard of `like`.
// RESOURCE_EXHAUSTED (nothing kept) when a device budget is exceeded.
absl::StatusOr<StagingBuffers> AllocateStaging(DeviceBackend* backend, const Tensor& like);

// All-gather: staging[p] holds the blocks of p's group rank by rank (block
// j = the input box of rank j, at offset j * block bytes); copies each into
// the box of result shard p.
absl::Status UnpackGathered(DeviceBackend* backend, const CollectivePlan& plan, const Tensor& input,
                            const StagingBuffers& staging, Tensor* result);

// Reduce-scatter: writes input shard p's sub-blocks (block j = the result
// box of rank j of p's group) one after the other into staging[p].
absl::Status PackForScatter(DeviceBackend* backend, const CollectivePlan& plan, const Tensor& input,
                            const Tensor& result, StagingBuffers* staging);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_COLLECTIVE_STAGING_H_
