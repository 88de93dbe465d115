#include "server/session/session_flags.h"

#include "absl/flags/flag.h"
#include "absl/time/time.h"

ABSL_FLAG(absl::Duration, session_sweep_interval, absl::Seconds(1),
          "How often sessions whose lease expired are ended and their tensors freed.");

namespace placement::server {

SessionOptions SessionOptionsFromFlags() {
  SessionOptions options;
  options.sweep_interval = absl::GetFlag(FLAGS_session_sweep_interval);
  return options;
}

}  // namespace placement::server
