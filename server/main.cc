// placementd: flags -> DaemonConfig -> Daemon; signals; exit codes. Every
// flag is declared beside the module that owns it (DaemonConfigFromFlags,
// server/daemon_flags.cc).
//
// Exit codes: 0 after a clean drain, 1 when the daemon cannot start (address
// in use, backend unusable, --ready_file not writable), 2 for invalid flags.
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/lock_order_checks.h"
#include "server/command_line.h"
#include "server/daemon.h"
#include "server/logging.h"
#include "server/platform/platform_registry.h"

int main(int argc, char** argv) {
  placement::SkipLockOrderChecksInRelease();
  using namespace placement::server;  // NOLINT(build/namespaces): main only
  std::vector<std::string> platforms = PlatformRegistry::Global().Names();
  std::sort(platforms.begin(), platforms.end());
  const std::string usage = absl::StrCat(
      "placementd: serves this machine's accelerators over gRPC.\n"
      "  placementd --listen=127.0.0.1:50051 [--backend=auto|",
      absl::StrJoin(platforms, "|"), "] [--flagfile=FILE]");
  if (auto code = HandleHelpOrVersion(argc, argv, usage, std::cout)) return *code;
  absl::SetProgramUsageMessage(usage);
  absl::ParseCommandLine(argc, argv);

  auto level = LogLevelFromFlags();
  if (!level.ok()) {
    std::fprintf(stderr, "placementd: %s\n", std::string(level.status().message()).c_str());
    return 2;
  }
  SetLogLevel(*level);

  // Signals are taken synchronously by this thread; every thread the daemon
  // starts inherits the blocked mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  auto daemon = Daemon::Start(DaemonConfigFromFlags());
  if (!daemon.ok()) {
    LogError("cannot start: ", daemon.status().ToString());
    return daemon.status().code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  int signal_number = 0;
  while (sigwait(&signals, &signal_number) == 0 && signal_number == SIGHUP) {
    LogInfo("received SIGHUP; reloading --auth_file");
    (*daemon)->Reload();
  }
  LogInfo("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT", "; draining");
  (*daemon)->Drain();
  daemon->reset();
  return 0;
}
