// placectl's command line, parsed completely before any connection is made.
//
// A command line is global flags, command words ("tensor put"), operands and
// command flags, in any order. SplitCommandLine separates them:
//   - "--" ends the flags: every later token is a word ("tensor rm -- -x").
//   - A token that starts with '-' followed by a digit or '.' is a word, so
//     negative numbers need no "--" ("validate-batch-size -5").
//   - "--name=value" and "-name=value" set a flag; "--name value" takes the
//     next token as the value unless the flag is a bool; "--name" alone sets a
//     bool flag to true, "--noname" to false.
//   - "--help" / "-h" and "--version" are recorded, not parsed as flags.
// Flags are absl flags (ABSL_FLAG in the command files); an unknown name or
// a value that does not parse is INVALID_ARGUMENT naming the flag.
//
// Then the words are matched against the command table (command_table.cc):
// FindCommand picks the command, CheckInvocation checks the operand count
// and that every flag given applies to that command, and ApplyFlags stores
// the values. Every failure is INVALID_ARGUMENT with a message that names the
// command, the flag or the operand, and main exits 2 with it.
#ifndef PLACEMENT_TOOLS_PLACECTL_ARGS_H_
#define PLACEMENT_TOOLS_PLACECTL_ARGS_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace placement::placectl {

using Args = std::vector<std::string>;

class Session;
// Runs one command with its operands (the words after the command's own
// words); returns the exit code: 0 ok, 1 the call or a local file failed, 2
// usage error.
using Runner = int (*)(Session& session, const Args& operands);

// One placectl command.
struct CommandSpec {
  std::string path;                // "tensor put"
  std::string operands;            // "FILE.npy" (for usage lines)
  std::string summary;             // one line for `placectl help`
  std::string details;             // more lines for `placectl help COMMAND`; may be empty
  std::vector<std::string> flags;  // flags beyond the global ones
  int min_operands = 0;
  int max_operands = 0;  // -1: no limit
  Runner run = nullptr;
  std::vector<std::string> aliases;  // other paths, e.g. "tensor delete"
};

// Flags every command accepts.
const std::vector<std::string>& GlobalFlags();

struct SplitCommandLine {
  Args words;
  // Flag name (without dashes or the "no" prefix) and its value text.
  std::vector<std::pair<std::string, std::string>> flags;
  bool help = false;
  bool version = false;
};

// Splits argv[1..]; INVALID_ARGUMENT for unknown flags and for a non-bool
// flag without a value.
absl::StatusOr<SplitCommandLine> SplitArgs(const std::vector<std::string>& argv);

// The command whose path (or alias) is the longest prefix of `words`, and
// how many words that path has. INVALID_ARGUMENT "unknown command 'x'" or
// "unknown tensor command 'x'" otherwise (an empty `words` too).
absl::StatusOr<std::pair<const CommandSpec*, size_t>> FindCommand(
    const std::vector<CommandSpec>& table, const Args& words);

// Every flag in `line` is global or one of `spec`'s, and the operand count
// fits. INVALID_ARGUMENT naming the flag or the extra operands.
absl::Status CheckInvocation(const CommandSpec& spec, const SplitCommandLine& line,
                             const Args& operands);

// Parses every flag value into its absl flag. INVALID_ARGUMENT "invalid
// value 'x' for --device: ...".
absl::Status ApplyFlags(const SplitCommandLine& line);

// "usage: placectl tensor put FILE.npy [flags]".
std::string UsageLine(const CommandSpec& spec);
// The long help of one command: usage, summary, details, and each flag with
// its help text and default.
std::string CommandHelp(const CommandSpec& spec);
// The commands whose path starts with `prefix` ("" = all), one line each.
std::string CommandList(const std::vector<CommandSpec>& table, absl::string_view prefix);

// True when `text` is a number in the sense of SplitArgs ("-5", "-0.5").
bool LooksLikeNegativeNumber(absl::string_view text);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_ARGS_H_
