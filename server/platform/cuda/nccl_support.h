// What the NCCL code of the "cuda" platform shares -- the in-node
// NcclEngine and the cross-process NcclTransport: NCCL's and CUDA's errors
// as absl::Status, our dtypes and reductions as NCCL's, and the enqueueing
// of one rank's part of a collective.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_SUPPORT_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_SUPPORT_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/collective/collective_engine.h"

namespace placement::server {

// ncclSystemError / ncclRemoteError are failures of the transport or a
// peer (UNAVAILABLE); anything else is a bug or a broken installation
// (INTERNAL). The message keeps NCCL's text and its last error: "what: nccl
// error 6: remote process exited or there was a network error; last error:
// ...". `comm` may be null.
absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what);

// INTERNAL "what: cudaErrorX: text".
absl::Status CudaStatus(cudaError_t err, absl::string_view what);

// f32, f64, f16, bf16, i8, i32, i64, u8; INVALID_ARGUMENT for the dtypes
// NCCL cannot reduce (i16, bool).
absl::StatusOr<ncclDataType_t> NcclReduceType(DType dtype);

// SUM, MEAN (ncclAvg), MAX, MIN, PROD.
ncclRedOp_t NcclOp(ReduceOp op);

// Checks that NCCL can run `kind` on `dtype` (reductions: NcclReduceType).
absl::Status CheckNcclKind(CollectiveKind kind, DType dtype);

// Enqueues one rank's part of `kind` (sizes from its buffers: the table of
// collective_engine.h) on `comm` and `stream`, as a rank of a group whose
// broadcast root is `root`. All-gather and broadcast move bytes, so they
// take any dtype. REQUIRES: inside ncclGroupStart / ncclGroupEnd when
// several ranks of one process enqueue; CheckNcclKind passed.
ncclResult_t EnqueueNcclRank(CollectiveKind kind, DType dtype, ReduceOp op, int root,
                             const RankBuffers& rank, ncclComm_t comm, cudaStream_t stream);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_NCCL_SUPPORT_H_
