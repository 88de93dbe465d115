// The "cuda" platform's flags, in every build (see cuda_options.h).
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "server/platform/cuda/cuda_options.h"

ABSL_FLAG(double, cuda_memory_fraction, 0.9,
          "Fraction of each GPU's free memory at start the daemon may allocate.");
ABSL_FLAG(int32_t, cuda_logical_devices, 1,
          "Devices each GPU is presented as (logical GPUs sharing it; collectives among them "
          "run host-staged).");
ABSL_FLAG(int64_t, cuda_device_memory, 0,
          "Byte budget of each GPU device; 0 = --cuda_memory_fraction of the GPU's free memory "
          "split evenly among its logical devices.");
ABSL_FLAG(std::vector<std::string>, cuda_gpus, {},
          "CUDA ordinals this daemon owns, comma-separated (default: every GPU); several "
          "daemons on one host each take their own GPUs.");

namespace placement::server {

CudaPlatformOptions CudaOptionsFromFlags() {
  CudaPlatformOptions options;
  options.memory_fraction = absl::GetFlag(FLAGS_cuda_memory_fraction);
  options.logical_devices = absl::GetFlag(FLAGS_cuda_logical_devices);
  options.device_memory_bytes = absl::GetFlag(FLAGS_cuda_device_memory);
  options.gpus = absl::GetFlag(FLAGS_cuda_gpus);
  return options;
}

}  // namespace placement::server
