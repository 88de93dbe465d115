// CudaBackend's shard export and import (DeviceBackend::ExportShard /
// ImportForUpload, docs/api/views.md): CUDA IPC handles. An export is the
// cudaIpcMemHandle_t of the buffer's cudaMalloc block (offset 0: a buffer is
// a whole block); from then on the block is never cached for reuse, since
// the reader's mapping stays until it closes the handle. An import opens the
// writer's handle, checks the range against the allocation
// (cuMemGetAddressRange, found through the runtime: a range past it would
// fault the daemon's context),
// copies device to device on the GPU's copy stream and closes the handle.
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "server/platform/cuda/cuda_backend.h"

namespace placement::server {
namespace {

// cuMemGetAddressRange through the runtime's driver entry points: linking
// libcuda itself would make the daemon need a driver even on the CPU
// platform. Null when the driver does not offer it.
using AddressRangeFn = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
AddressRangeFn AddressRange() {
  static const AddressRangeFn fn = [] {
    void* found = nullptr;
    cudaDriverEntryPointQueryResult result;
    if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &found, 12000, cudaEnableDefault,
                                         &result) != cudaSuccess ||
        result != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return AddressRangeFn{nullptr};
    }
    return reinterpret_cast<AddressRangeFn>(found);
  }();
  return fn;
}

absl::Status IpcError(cudaError_t err, absl::string_view what) {
  cudaGetLastError();  // clear it so later runtime calls do not report it
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorName(err), ": ", cudaGetErrorString(err)));
}

}  // namespace

bool CudaBackend::Reusable(int, void* block, int64_t) const {
  absl::MutexLock lock(&exported_mu_);
  return !exported_.contains(block);
}

void CudaBackend::ForgetExported(void* block) {
  absl::MutexLock lock(&exported_mu_);
  exported_.erase(block);
}

absl::StatusOr<std::unique_ptr<ShardExport>> CudaBackend::ExportShard(const DeviceBuffer& buffer) {
  auto out = std::make_unique<ShardExport>();
  out->size = buffer.size();
  if (buffer.size() == 0) return out;
  cudaSetDevice(Ordinal(buffer.device_id()));
  cudaIpcMemHandle_t handle;
  if (cudaError_t err = cudaIpcGetMemHandle(&handle, buffer.data()); err != cudaSuccess) {
    return IpcError(err, absl::StrCat("cudaIpcGetMemHandle (device ", buffer.device_id(), ")"));
  }
  {
    absl::MutexLock lock(&exported_mu_);
    exported_.insert(buffer.data());
  }
  out->ipc_handle.assign(reinterpret_cast<const char*>(&handle), sizeof(handle));
  return out;
}

absl::Status CudaBackend::ImportForUpload(absl::string_view handle, int64_t offset, int64_t size,
                                          DeviceBuffer& dst) {
  if (handle.size() != sizeof(cudaIpcMemHandle_t)) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc_handle has ", handle.size(),
                                                   " bytes; a cudaIpcMemHandle_t has ",
                                                   sizeof(cudaIpcMemHandle_t)));
  }
  if (offset < 0 || size < 0 || size > dst.size()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot import ", size, " bytes at offset ",
                                                   offset, " into a ", dst.size(), "-byte buffer"));
  }
  if (size == 0) return absl::OkStatus();
  const int ordinal = Ordinal(dst.device_id());
  cudaSetDevice(ordinal);
  cudaIpcMemHandle_t ipc;
  std::memcpy(&ipc, handle.data(), sizeof(ipc));
  void* mapped = nullptr;
  if (cudaError_t err = cudaIpcOpenMemHandle(&mapped, ipc, cudaIpcMemLazyEnablePeerAccess);
      err != cudaSuccess) {
    return absl::InvalidArgumentError(absl::StrCat("cuda_ipc_handle cannot be opened on GPU ",
                                                   ordinal, ": ", cudaGetErrorName(err), ": ",
                                                   cudaGetErrorString(err)));
  }
  absl::Status status = [&]() -> absl::Status {
    CUdeviceptr base = 0;
    size_t extent = 0;
    const AddressRangeFn range = AddressRange();
    if (range == nullptr ||
        range(&base, &extent, reinterpret_cast<CUdeviceptr>(mapped)) != CUDA_SUCCESS) {
      return absl::InternalError("cuMemGetAddressRange of an imported allocation failed");
    }
    const int64_t available = static_cast<int64_t>(extent) -
                              static_cast<int64_t>(reinterpret_cast<CUdeviceptr>(mapped) - base);
    if (offset > available || size > available - offset) {
      return absl::OutOfRangeError(absl::StrCat("offset ", offset, " + size ", size,
                                                " is past the end of the imported allocation (",
                                                available, " bytes)"));
    }
    return CopyOnCopyStream(ordinal, dst.data(), static_cast<char*>(mapped) + offset, size);
  }();
  cudaIpcCloseMemHandle(mapped);
  return status;
}

}  // namespace placement::server
