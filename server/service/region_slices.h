// The transfer handlers' one way into regions: resolves a request's
// RegionSlice (UploadRequest.region, BatchChunk.region,
// DownloadRequest.destination) for the calling tenant and session.
#ifndef PLACEMENT_SERVER_SERVICE_REGION_SLICES_H_
#define PLACEMENT_SERVER_SERVICE_REGION_SLICES_H_

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "placement/v1/region_service.pb.h"
#include "placement/v1/tensor_service.pb.h"
#include "server/auth/caller.h"
#include "server/region/region_registry.h"

namespace placement::server {

// RegionRegistry::Acquire of `slice` (of which the transfer uses the first
// `used` bytes, when >= 0); `field` names it in errors. FAILED_PRECONDITION
// when the daemon has no region registry.
inline absl::StatusOr<RegionBytes> AcquireRegionSlice(RegionRegistry* regions, const Caller& caller,
                                                      absl::string_view field,
                                                      const placement::v1::RegionSlice& slice,
                                                      RegionAccess access, int64_t used = -1) {
  if (regions == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(field, ": this daemon does not serve shared-memory regions"));
  }
  return regions->Acquire(caller, field, slice.region_id(), slice.offset(), slice.size(), access,
                          used);
}

// The bytes of a BatchChunk (UploadBatch, Prefetch) whose `region` is set.
// INVALID_ARGUMENT when it carries `data` as well.
inline absl::StatusOr<RegionBytes> AcquireBatchChunkRegion(RegionRegistry* regions,
                                                           const Caller& caller,
                                                           const placement::v1::BatchChunk& chunk) {
  if (!chunk.data().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk carries both data (", chunk.data().size(),
                     " bytes) and region; a BatchChunk's bytes come from one of them"));
  }
  return AcquireRegionSlice(regions, caller, "chunk.region", chunk.region(), RegionAccess::kRead);
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_REGION_SLICES_H_
