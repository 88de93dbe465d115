// placementd's --help and --version, answered before Abseil parses the
// command line: Abseil 20220623's own --help lists only flags defined in a
// file named after the binary and exits 1, and its --version describes how
// Abseil itself was built.
#ifndef PLACEMENT_SERVER_COMMAND_LINE_H_
#define PLACEMENT_SERVER_COMMAND_LINE_H_

#include <optional>
#include <ostream>
#include <string>

namespace placement::server {

// When argv (before any "--") holds --help / -h / --helpfull / --helpshort or
// --version, prints the answer to `out` and returns the exit code (0);
// otherwise prints nothing and returns nullopt. `usage` heads the help text.
std::optional<int> HandleHelpOrVersion(int argc, char** argv, const std::string& usage,
                                       std::ostream& out);

// "placementd 0.1.0 (git v0.1.0-3-gabcdef)" then one line each: build type,
// compiler, backends compiled in, library versions.
std::string VersionText();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COMMAND_LINE_H_
