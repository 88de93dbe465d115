// The "cpu" platform's flags. They are linked into every binary with the
// platform (server/platform/cpu/CMakeLists.txt), so --help lists them.
#include "absl/flags/flag.h"
#include "server/platform/cpu/cpu_options.h"

ABSL_FLAG(int32_t, cpu_devices, 8, "Number of CPU virtual devices (CPU backend).");
ABSL_FLAG(int64_t, cpu_device_memory, 0,
          "Byte budget of each CPU virtual device; 0 = half of physical memory split evenly.");
ABSL_FLAG(int64_t, cpu_device_cache_bytes, int64_t{256} << 20,
          "Freed blocks each CPU virtual device keeps for reuse (within its budget); 0 disables "
          "the cache.");

namespace placement::server {

CpuPlatformOptions CpuOptionsFromFlags() {
  CpuPlatformOptions options;
  options.num_devices = absl::GetFlag(FLAGS_cpu_devices);
  options.device_memory_bytes = absl::GetFlag(FLAGS_cpu_device_memory);
  options.cache_bytes_per_device = absl::GetFlag(FLAGS_cpu_device_cache_bytes);
  return options;
}

}  // namespace placement::server
