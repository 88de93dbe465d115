#include "server/command_line.h"

#include <algorithm>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/stubs/common.h"
#include "grpcpp/grpcpp.h"
#include "placement_git_describe.h"
#include "server/collective/transport/transport_registry.h"
#include "server/daemon_identity.h"
#include "server/platform/platform_registry.h"

#ifndef PLACEMENT_BUILD_TYPE
#define PLACEMENT_BUILD_TYPE ""
#endif
#ifndef PLACEMENT_SANITIZER_NAME
#define PLACEMENT_SANITIZER_NAME ""
#endif

namespace placement::server {
namespace {

std::string Compiler() {
#if defined(__clang__)
  return absl::StrCat("clang ", __clang_major__, ".", __clang_minor__, ".", __clang_patchlevel__);
#elif defined(__GNUC__)
  return absl::StrCat("gcc ", __GNUC__, ".", __GNUC_MINOR__, ".", __GNUC_PATCHLEVEL__);
#else
  return "unknown compiler";
#endif
}

std::string BuildType() {
  std::string type = PLACEMENT_BUILD_TYPE;
  if (type.empty()) type = "no CMAKE_BUILD_TYPE";
#ifdef NDEBUG
  absl::StrAppend(&type, ", assertions off");
#else
  absl::StrAppend(&type, ", assertions on");
#endif
  if (!std::string(PLACEMENT_SANITIZER_NAME).empty()) {
    absl::StrAppend(&type, ", sanitizer ", PLACEMENT_SANITIZER_NAME);
  }
  return type;
}

// Our flags: everything not defined inside Abseil itself.
std::vector<const absl::CommandLineFlag*> DaemonFlags() {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired() || absl::StrContains(flag->Filename(), "absl/")) continue;
    flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  return flags;
}

void PrintHelp(const std::string& usage, std::ostream& out) {
  out << usage << "\n\nFlags (--flag=value; also read from --flagfile=FILE, one per line):\n";
  for (const absl::CommandLineFlag* flag : DaemonFlags()) {
    out << "  --" << flag->Name()
        << " (default: " << (flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue())
        << ")\n      " << flag->Help() << "\n";
  }
  out << "  --flagfile=FILE\n      Read more flags from FILE ('#' starts a comment line).\n"
      << "  --help, -h\n      This text.\n"
      << "  --version\n      Version and build information.\n"
      << "\nExit codes: 0 after a clean drain, 1 when the daemon cannot start, 2 for invalid "
         "flags.\n";
}

}  // namespace

std::string VersionText() {
  // Registered platforms, lowest priority (the always-built cpu) first;
  // those compiled out say why after a ';'.
  std::vector<std::string> backends, missing;
  std::vector<const Platform*> platforms = PlatformRegistry::Global().ByPriority();
  std::reverse(platforms.begin(), platforms.end());
  for (const Platform* platform : platforms) {
    (platform->compiled_in() ? backends : missing).push_back(platform->BuildNote());
  }
  for (const std::string& note : TransportRegistry::Global().Notes()) backends.push_back(note);
  return absl::StrCat("placementd ", PlacementVersion(), " (git ", PLACEMENT_GIT_DESCRIBE, ")\n",
                      "build: ", BuildType(), "\n", "compiler: ", Compiler(), ", __cplusplus ",
                      __cplusplus, "\n", "backends: ", absl::StrJoin(backends, ", "),
                      missing.empty() ? "" : absl::StrCat("; ", absl::StrJoin(missing, ", ")), "\n",
                      "libraries: gRPC ", grpc::Version(), ", protobuf ",
                      google::protobuf::internal::VersionString(GOOGLE_PROTOBUF_VERSION), "\n");
}

std::optional<int> HandleHelpOrVersion(int argc, char** argv, const std::string& usage,
                                       std::ostream& out) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg == "--help" || arg == "-help" || arg == "-h" || arg == "--helpfull" ||
        arg == "-helpfull" || arg == "--helpshort" || arg == "-helpshort") {
      PrintHelp(usage, out);
      return 0;
    }
    if (arg == "--version" || arg == "-version") {
      out << VersionText();
      return 0;
    }
  }
  return std::nullopt;
}

}  // namespace placement::server
