// The "cpu" platform's settings (--cpu_devices, --cpu_device_memory), found
// by the platform in PlatformConfig::options; the flags are declared and
// read in cpu_flags.cc.
//
// Plain struct; thread-compatible.
#ifndef PLACEMENT_SERVER_PLATFORM_CPU_CPU_OPTIONS_H_
#define PLACEMENT_SERVER_PLATFORM_CPU_CPU_OPTIONS_H_

#include <cstdint>

namespace placement::server {

struct CpuPlatformOptions {
  int num_devices = 8;
  // Budget per virtual device in bytes; 0 = half the machine's physical
  // memory divided evenly among the devices.
  int64_t device_memory_bytes = 0;
  // Freed blocks kept per device (counted against its budget); 0 disables
  // (--cpu_device_cache_bytes).
  int64_t cache_bytes_per_device = int64_t{256} << 20;
};

// The values of the --cpu_* flags.
CpuPlatformOptions CpuOptionsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_CPU_CPU_OPTIONS_H_
