#include "server/platform/cuda/nccl_support.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace placement::server {

absl::Status NcclStatus(ncclResult_t result, ncclComm_t comm, absl::string_view what) {
  std::string message = absl::StrCat(what, ": nccl error ", static_cast<int>(result), ": ",
                                     ncclGetErrorString(result));
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && last[0] != '\0') absl::StrAppend(&message, "; last error: ", last);
  if (result == ncclSystemError || result == ncclRemoteError) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

absl::Status CudaStatus(cudaError_t err, absl::string_view what) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

absl::StatusOr<ncclDataType_t> NcclReduceType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kF64:
      return ncclFloat64;
    case DType::kF16:
      return ncclFloat16;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kI8:
      return ncclInt8;
    case DType::kI32:
      return ncclInt32;
    case DType::kI64:
      return ncclInt64;
    case DType::kU8:
      return ncclUint8;
    case DType::kI16:
    case DType::kBool:
      break;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("NCCL cannot reduce dtype ", DTypeName(dtype),
                   "; supported: f32, f64, f16, bf16, i8, i32, i64, u8"));
}

ncclRedOp_t NcclOp(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMean:
      return ncclAvg;
    case ReduceOp::kMax:
      return ncclMax;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kProd:
      return ncclProd;
  }
  return ncclSum;
}

absl::Status CheckNcclKind(CollectiveKind kind, DType dtype) {
  if (kind != CollectiveKind::kAllReduce && kind != CollectiveKind::kReduceScatter) {
    return absl::OkStatus();
  }
  return NcclReduceType(dtype).status();
}

ncclResult_t EnqueueNcclRank(CollectiveKind kind, DType dtype, ReduceOp op, int root,
                             const RankBuffers& rank, ncclComm_t comm, cudaStream_t stream) {
  const bool reduces = kind == CollectiveKind::kAllReduce || kind == CollectiveKind::kReduceScatter;
  ncclDataType_t type = ncclInt8;  // data movement: bytes
  size_t elem = 1;
  if (reduces) {
    type = *NcclReduceType(dtype);
    elem = static_cast<size_t>(DTypeSize(dtype));
  }
  void* recv = rank.recv->data();
  const void* send = rank.send != nullptr ? rank.send->data() : recv;
  switch (kind) {
    case CollectiveKind::kAllReduce:
      return ncclAllReduce(send, recv, rank.recv->size() / elem, type, NcclOp(op), comm, stream);
    case CollectiveKind::kReduceScatter:
      return ncclReduceScatter(send, recv, rank.recv->size() / elem, type, NcclOp(op), comm,
                               stream);
    case CollectiveKind::kAllGather:
      return ncclAllGather(send, recv, rank.send->size(), type, comm, stream);
    case CollectiveKind::kBroadcast:
      return ncclBroadcast(send, recv, rank.recv->size(), type, root, comm, stream);
  }
  return ncclInvalidArgument;
}

}  // namespace placement::server
