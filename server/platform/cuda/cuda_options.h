// The "cuda" platform's settings (--cuda_memory_fraction,
// --cuda_logical_devices, --cuda_device_memory, --cuda_gpus), found by the platform in
// PlatformConfig::options; the flags are declared and read in
// cuda_flags.cc, which every build has (a build without CUDA keeps the
// flags, so flag files work on both).
//
// Plain struct; thread-compatible.
#ifndef PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_OPTIONS_H_
#define PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace placement::server {

struct CudaPlatformOptions {
  double memory_fraction = 0.9;
  // Devices each GPU is presented as, and each one's budget (0 = an even
  // share of memory_fraction of the GPU's free memory).
  int32_t logical_devices = 1;
  int64_t device_memory_bytes = 0;
  // Freed blocks kept per device; -1 = the backend's default.
  int64_t cache_bytes_per_device = -1;
  // The CUDA ordinals the daemon owns, as given ("0", "2"); empty = all.
  std::vector<std::string> gpus;
};

// The values of the --cuda_* flags.
CudaPlatformOptions CudaOptionsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CUDA_CUDA_OPTIONS_H_
