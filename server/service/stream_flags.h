// The stream bounds' flags (--max_streams, --tenant_max_streams,
// --stream_idle_timeout), declared and read in stream_flags.cc; only
// placementd links them.
#ifndef PLACEMENT_SERVER_SERVICE_STREAM_FLAGS_H_
#define PLACEMENT_SERVER_SERVICE_STREAM_FLAGS_H_

#include "server/service/stream_registry.h"

namespace placement::server {

StreamLimits StreamLimitsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_STREAM_FLAGS_H_
