#include "server/session/session_flags.h"

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(absl::Duration, session_sweep_interval, absl::Seconds(1),
          "How often sessions whose lease expired are ended and their tensors freed.");
ABSL_FLAG(int64_t, max_sessions, 4096,
          "Sessions open at once over all tenants; past it OpenSession is RESOURCE_EXHAUSTED; "
          "0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_sessions, 1024,
          "Sessions one tenant may have open at once; 0 = unlimited.");

namespace placement::server {

SessionOptions SessionOptionsFromFlags() {
  SessionOptions options;
  options.sweep_interval = absl::GetFlag(FLAGS_session_sweep_interval);
  options.max_sessions = absl::GetFlag(FLAGS_max_sessions);
  options.max_sessions_per_tenant = absl::GetFlag(FLAGS_tenant_max_sessions);
  return options;
}

}  // namespace placement::server
