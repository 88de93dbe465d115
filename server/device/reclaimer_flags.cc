#include "server/device/reclaimer_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(absl::Duration, device_cache_idle, absl::Seconds(10),
          "Cached device blocks unused this long are given back to the system (at least "
          "100ms).");
ABSL_FLAG(int64_t, host_memory_min_available, 0,
          "When the host's MemAvailable drops below this many bytes, every cached device block "
          "is given back; 0 = 1/16 of physical memory.");

namespace placement::server {

ReclaimerOptions ReclaimerOptionsFromFlags() {
  ReclaimerOptions options;
  options.cache_idle = absl::GetFlag(FLAGS_device_cache_idle);
  options.min_available_bytes = absl::GetFlag(FLAGS_host_memory_min_available);
  return options;
}

}  // namespace placement::server
