// Plain CUDA copies between host memory and GPU 0 -- the limits the daemon's
// transfers are compared with in the same run (tensor_transfer_bench
// --backend=cuda): cudaMemcpy from / to pinned memory (cudaHostAlloc) and
// from / to the caller's pageable memory. Built only with CUDA.
#ifndef PLACEMENT_BENCH_CUDA_COPY_H_
#define PLACEMENT_BENCH_CUDA_COPY_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"

namespace placement::bench {

class CudaCopy {
 public:
  // A device buffer and a pinned host buffer of `bytes` each, on GPU 0.
  static absl::StatusOr<std::unique_ptr<CudaCopy>> Create(int64_t bytes);
  ~CudaCopy();

  // Synchronous copies of all `bytes`; false on a CUDA error (printed).
  bool HostToDevice(const void* pageable);
  bool HostToDevicePinned();
  bool DeviceToHost(void* pageable);
  bool DeviceToHostPinned();

 private:
  CudaCopy(int64_t bytes, void* device, void* pinned)
      : bytes_(bytes), device_(device), pinned_(pinned) {}
  int64_t bytes_;
  void* device_;
  void* pinned_;
};

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_CUDA_COPY_H_
