// Minimal leveled logging to stderr (Abseil 20220623 has no absl/log):
// "I1122 10:00:00.123456 placementd] message". Thread-safe; each line is
// written with one write(2).
#ifndef PLACEMENT_SERVER_LOGGING_H_
#define PLACEMENT_SERVER_LOGGING_H_

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace placement::server {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// "debug", "info", "warning", "error". INVALID_ARGUMENT otherwise.
absl::StatusOr<LogLevel> ParseLogLevel(absl::string_view name);
// The --log_level flag, parsed (declared in logging_flags.cc).
absl::StatusOr<LogLevel> LogLevelFromFlags();
void SetLogLevel(LogLevel level);
bool LogEnabled(LogLevel level);
void LogLine(LogLevel level, absl::string_view message);

template <typename... Args>
void Log(LogLevel level, const Args&... args) {
  if (LogEnabled(level)) LogLine(level, absl::StrCat(args...));
}
template <typename... Args>
void LogInfo(const Args&... args) {
  Log(LogLevel::kInfo, args...);
}
template <typename... Args>
void LogWarning(const Args&... args) {
  Log(LogLevel::kWarning, args...);
}
template <typename... Args>
void LogError(const Args&... args) {
  Log(LogLevel::kError, args...);
}
template <typename... Args>
void LogDebug(const Args&... args) {
  Log(LogLevel::kDebug, args...);
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_LOGGING_H_
