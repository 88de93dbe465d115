// PlatformConfig: everything a platform needs to make its DeviceBackend and
// its intra-node CollectiveEngine, filled by the daemon from its flags. Node
// identity (process_index) is the daemon's: it is passed to whichever
// platform is chosen, never owned by one backend's options.
//
// Plain struct; thread-compatible.
#ifndef PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_
#define PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_

#include <cstdint>

namespace placement::server {

// --cpu_devices, --cpu_device_memory.
struct CpuPlatformOptions {
  int num_devices = 8;
  // Budget per virtual device in bytes; 0 = half the machine's physical
  // memory divided evenly among the devices.
  int64_t device_memory_bytes = 0;
  // Freed blocks kept per device (counted against its budget); 0 disables.
  int64_t cache_bytes_per_device = int64_t{512} << 20;
};

// --cuda_memory_fraction, --cuda_logical_devices, --cuda_device_memory.
struct CudaPlatformOptions {
  double memory_fraction = 0.9;
  // Devices each GPU is presented as, and each one's budget (0 = an even
  // share of memory_fraction of the GPU's free memory).
  int32_t logical_devices = 1;
  int64_t device_memory_bytes = 0;
};

// Options of the LocalEngine that serves groups of this node's devices
// (directly on host-addressable devices, host-staged otherwise).
struct LocalCollectiveOptions {
  int num_threads = -1;  // pool threads besides each caller; -1 = default
};

struct PlatformConfig {
  // This node's index among the daemons of a job: device ids are
  // process_index * kMaxLocalDevices + local index.
  int32_t process_index = 0;
  CpuPlatformOptions cpu;
  CudaPlatformOptions cuda;
  LocalCollectiveOptions local_collectives;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PLATFORM_PLATFORM_CONFIG_H_
