// Chooses and creates the DeviceBackend for --backend=auto|cpu|cuda.
#ifndef PLACEMENT_SERVER_DEVICE_BACKEND_FACTORY_H_
#define PLACEMENT_SERVER_DEVICE_BACKEND_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/device/cpu/cpu_backend.h"
#include "server/device/device_backend.h"

namespace placement::server {

struct BackendOptions {
  std::string kind = "auto";  // "auto", "cpu" or "cuda"
  CpuBackendOptions cpu;
  double cuda_memory_fraction = 0.9;
  // Devices each GPU is presented as, and each one's budget (0 = an even
  // share of cuda_memory_fraction of the GPU's free memory).
  int32_t cuda_logical_devices = 1;
  int64_t cuda_device_memory_bytes = 0;
};

struct BackendSelection {
  std::unique_ptr<DeviceBackend> backend;
  // Why this backend was chosen, for the log and GetStatus ("no CUDA
  // driver or GPU found (cudaErrorNoDevice: ...); using 8 CPU virtual devices").
  std::string note;
};

// "cuda": FAILED_PRECONDITION when no GPU (or the build has no CUDA).
// "auto": CUDA when a driver and GPUs are present, otherwise CPU.
// INVALID_ARGUMENT for any other kind.
absl::StatusOr<BackendSelection> CreateBackend(const BackendOptions& options);

// Whether this binary was built with the CUDA backend.
bool BuiltWithCuda();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_BACKEND_FACTORY_H_
