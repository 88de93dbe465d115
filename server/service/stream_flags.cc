#include "server/service/stream_flags.h"

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(int64_t, max_streams, 1024,
          "Streams (uploads, downloads, prefetch) open at once, in total; 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_streams, 0, "Streams open at once per tenant; 0 = unlimited.");
ABSL_FLAG(absl::Duration, stream_idle_timeout, absl::Seconds(60),
          "An upload or download that makes no progress this long is cancelled and frees what it "
          "reserved.");

namespace placement::server {

StreamLimits StreamLimitsFromFlags() {
  StreamLimits limits;
  limits.max_streams = absl::GetFlag(FLAGS_max_streams);
  limits.max_streams_per_tenant = absl::GetFlag(FLAGS_tenant_max_streams);
  limits.idle_timeout = absl::GetFlag(FLAGS_stream_idle_timeout);
  return limits;
}

}  // namespace placement::server
