// The memory reclaimer's flags (--device_cache_idle,
// --host_memory_min_available), declared and read in reclaimer_flags.cc;
// only placementd links them.
#ifndef PLACEMENT_SERVER_DEVICE_RECLAIMER_FLAGS_H_
#define PLACEMENT_SERVER_DEVICE_RECLAIMER_FLAGS_H_

#include "server/device/memory_reclaimer.h"

namespace placement::server {

ReclaimerOptions ReclaimerOptionsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_RECLAIMER_FLAGS_H_
