// --log_level, read by placementd's main before anything logs.
#include <string>

#include "absl/flags/flag.h"
#include "server/logging.h"

ABSL_FLAG(std::string, log_level, "info", "debug, info, warning or error.");

namespace placement::server {

absl::StatusOr<LogLevel> LogLevelFromFlags() {
  return ParseLogLevel(absl::GetFlag(FLAGS_log_level));
}

}  // namespace placement::server
