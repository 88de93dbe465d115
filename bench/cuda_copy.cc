#include "bench/cuda_copy.h"

#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::bench {
namespace {

bool Ok(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return true;
  std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CudaCopy>> CudaCopy::Create(int64_t bytes) {
  void* device = nullptr;
  void* pinned = nullptr;
  if (cudaError_t err = cudaSetDevice(0); err != cudaSuccess) {
    return absl::FailedPreconditionError(absl::StrCat("cudaSetDevice: ", cudaGetErrorString(err)));
  }
  if (cudaError_t err = cudaMalloc(&device, bytes); err != cudaSuccess) {
    return absl::ResourceExhaustedError(absl::StrCat("cudaMalloc: ", cudaGetErrorString(err)));
  }
  if (cudaError_t err = cudaHostAlloc(&pinned, bytes, cudaHostAllocDefault); err != cudaSuccess) {
    cudaFree(device);
    return absl::ResourceExhaustedError(absl::StrCat("cudaHostAlloc: ", cudaGetErrorString(err)));
  }
  std::memset(pinned, 1, static_cast<size_t>(bytes));
  return std::unique_ptr<CudaCopy>(new CudaCopy(bytes, device, pinned));
}

CudaCopy::~CudaCopy() {
  cudaFree(device_);
  cudaFreeHost(pinned_);
}

bool CudaCopy::HostToDevice(const void* pageable) {
  return Ok(cudaMemcpy(device_, pageable, bytes_, cudaMemcpyHostToDevice), "H2D pageable");
}

bool CudaCopy::HostToDevicePinned() {
  return Ok(cudaMemcpy(device_, pinned_, bytes_, cudaMemcpyHostToDevice), "H2D pinned");
}

bool CudaCopy::DeviceToHost(void* pageable) {
  return Ok(cudaMemcpy(pageable, device_, bytes_, cudaMemcpyDeviceToHost), "D2H pageable");
}

bool CudaCopy::DeviceToHostPinned() {
  return Ok(cudaMemcpy(pinned_, device_, bytes_, cudaMemcpyDeviceToHost), "D2H pinned");
}

}  // namespace placement::bench
