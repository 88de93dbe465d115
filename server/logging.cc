#include "server/logging.h"

#include <unistd.h>

#include <atomic>
#include <string>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace placement::server {
namespace {
std::atomic<int> g_level{static_cast<int>(LogLevel::kInfo)};
}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name) {
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warning") return LogLevel::kWarning;
  if (name == "error") return LogLevel::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("--log_level must be debug, info, warning or error, got '", name, "'"));
}

void SetLogLevel(LogLevel level) { g_level.store(static_cast<int>(level)); }

bool LogEnabled(LogLevel level) { return static_cast<int>(level) >= g_level.load(); }

void LogLine(LogLevel level, absl::string_view message) {
  static constexpr char kLetters[] = {'D', 'I', 'W', 'E'};
  std::string line = absl::StrCat(
      std::string(1, kLetters[static_cast<int>(level)]),
      absl::FormatTime("%m%d %H:%M:%E6S", absl::Now(), absl::LocalTimeZone()), " placementd] ",
      message, "\n");
  ssize_t ignored = write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace placement::server
