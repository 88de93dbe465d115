// placectl [--target=ADDR] [--json] COMMAND [ARGS] [FLAGS]
//
// Parses the whole command line against the command table (args.h,
// command_table.cc) before connecting: usage errors exit 2 at once, help
// exits 0, and only a complete request dials the daemon.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/lock_order_checks.h"
#include "tools/placectl/args.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/output.h"
#include "tools/placectl/security_options.h"
#include "tools/placectl/session.h"

ABSL_FLAG(std::string, target, "",
          "placementd address: host:port or unix:/path (default: $PLACEMENT_TARGET, else "
          "127.0.0.1:50051).");
ABSL_FLAG(bool, json, false, "Print JSON (proto field names) instead of tables.");
ABSL_FLAG(int32_t, timeout_seconds, 30, "Deadline of each unary call, in seconds.");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(2),
          "How long to wait for the daemon to accept the connection (e.g. 2s, 500ms, 1m).");

#ifndef PLACEMENT_VERSION
#define PLACEMENT_VERSION "unknown"
#endif

namespace placement::placectl {
namespace {

constexpr char kOverview[] =
    "placectl: the operator CLI of placementd.\n\n"
    "usage: placectl [--target=ADDR | $PLACEMENT_TARGET] [--json] [--quiet]\n"
    "                [--connect_timeout=2s] [--timeout_seconds=30]\n"
    "                [--tls_ca=PEM [--tls_cert=PEM --tls_key=PEM] [--tls_server_name=N]]\n"
    "                [--token_file=PATH | --token=T | $PLACEMENT_TOKEN] [--session=ID]\n"
    "                COMMAND [ARGS] [FLAGS]\n\n"
    "Flags may come before or after the command words; '--' ends the flags (negative\n"
    "numbers need no '--'). Exit codes: 0 ok, 1 the call or a local file failed, 2 usage.\n"
    "What placectl creates is durable (kept until deleted), unless --session=ID joins a\n"
    "session. Uploads and downloads show a progress bar on a terminal (stderr); --quiet\n"
    "turns it off.\n\n"
    "commands:\n";

void PrintOverview(std::FILE* out) {
  std::fprintf(out, "%s%s\n'placectl help COMMAND' shows a command's flags.\n", kOverview,
               CommandList(CommandTable(), "").c_str());
}

// `placectl help [WORDS...]`, `placectl --help [WORDS...]`.
int RunHelp(const Args& words) {
  if (words.empty()) {
    PrintOverview(stdout);
    return 0;
  }
  auto found = FindCommand(CommandTable(), words);
  if (found.ok()) {  // operands after the command words are ignored here
    std::printf("%s", CommandHelp(*found->first).c_str());
    return 0;
  }
  std::string group = CommandList(CommandTable(), words[0]);
  if (words.size() == 1 && !group.empty()) {
    std::printf("placectl %s commands:\n%s", words[0].c_str(), group.c_str());
    return 0;
  }
  std::fprintf(stderr, "placectl: help: no command '%s' (see 'placectl help')\n",
               absl::StrJoin(words, " ").c_str());
  return 2;
}

int UsageFailure(absl::string_view message) {
  std::fprintf(stderr, "placectl: %.*s\n", static_cast<int>(message.size()), message.data());
  return 2;
}

int Main(const std::vector<std::string>& argv) {
  absl::StatusOr<SplitCommandLine> line = SplitArgs(argv);
  if (!line.ok()) return UsageFailure(line.status().message());
  if (line->version) {
    std::printf("placectl %s\n", PLACEMENT_VERSION);
    return 0;
  }
  if (!line->words.empty() && line->words[0] == "help") {
    return RunHelp(Args(line->words.begin() + 1, line->words.end()));
  }
  if (line->help) return RunHelp(line->words);
  if (line->words.empty()) {
    PrintOverview(stderr);
    return 2;
  }
  auto found = FindCommand(CommandTable(), line->words);
  if (!found.ok()) return UsageFailure(found.status().message());
  const CommandSpec& spec = *found->first;
  Args operands(line->words.begin() + static_cast<long>(found->second), line->words.end());
  absl::Status checked = CheckInvocation(spec, *line, operands);
  if (checked.ok()) checked = ApplyFlags(*line);
  if (!checked.ok()) {
    std::fprintf(stderr, "placectl: %s\n%s\n", std::string(checked.message()).c_str(),
                 UsageLine(spec).c_str());
    return 2;
  }
  std::string target = absl::GetFlag(FLAGS_target);
  const bool target_given = std::any_of(line->flags.begin(), line->flags.end(),
                                        [](const auto& flag) { return flag.first == "target"; });
  if (target_given && target.empty()) {
    return UsageFailure("--target must not be empty");
  }
  if (target.empty()) {
    const char* env = std::getenv("PLACEMENT_TARGET");
    target = env != nullptr && *env != '\0' ? env : "127.0.0.1:50051";
  }
  if (absl::GetFlag(FLAGS_timeout_seconds) < 1)
    return UsageFailure("--timeout_seconds must be >= 1");
  if (absl::GetFlag(FLAGS_connect_timeout) <= absl::ZeroDuration()) {
    return UsageFailure("--connect_timeout must be positive");
  }
  GlobalOptions options;
  options.target = target;
  options.json = absl::GetFlag(FLAGS_json);
  options.call_timeout = absl::Seconds(absl::GetFlag(FLAGS_timeout_seconds));
  options.connect_timeout = absl::GetFlag(FLAGS_connect_timeout);
  absl::Status secured = ApplySecurityFlags(options.connection);
  if (absl::IsInvalidArgument(secured)) return UsageFailure(secured.message());
  if (!secured.ok()) return ReportError(secured);
  if (!options.connection.token.empty() && !options.connection.tls &&
      !IsLocalTarget(options.target)) {
    std::fprintf(stderr, "placectl: warning: sending the token to %s without TLS (see --tls_ca)\n",
                 options.target.c_str());
  }
  std::set<std::string> given;
  for (const auto& [name, value] : line->flags) given.insert(name);
  Session session(options, &spec, std::move(given));
  return spec.run(session, operands);
}

}  // namespace
}  // namespace placement::placectl

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  return placement::placectl::Main(std::vector<std::string>(argv + 1, argv + argc));
}
