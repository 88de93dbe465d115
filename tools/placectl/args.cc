#include "tools/placectl/args.h"

#include <algorithm>
#include <cctype>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace placement::placectl {
namespace {

// The absl flag `name` when it is one placectl defines (absl's own flags
// such as --flagfile are not offered).
absl::CommandLineFlag* FindFlag(absl::string_view name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr || flag->IsRetired()) return nullptr;
  if (!absl::StrContains(flag->Filename(), "placectl")) return nullptr;
  return flag;
}

std::string Plural(size_t n, absl::string_view word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

std::string Words(const CommandSpec& spec) { return absl::StrCat("'", spec.path, "'"); }

}  // namespace

const std::vector<std::string>& GlobalFlags() {
  static const auto* flags = new std::vector<std::string>{
      "target", "json", "timeout_seconds", "connect_timeout", "quiet",
      // security_options.h
      "tls", "tls_ca", "tls_cert", "tls_key", "tls_server_name", "token", "token_file", "session"};
  return *flags;
}

bool LooksLikeNegativeNumber(absl::string_view text) {
  return text.size() >= 2 && text[0] == '-' &&
         (std::isdigit(static_cast<unsigned char>(text[1])) || text[1] == '.');
}

absl::StatusOr<SplitCommandLine> SplitArgs(const std::vector<std::string>& argv) {
  SplitCommandLine out;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token == "--") {
      out.words.insert(out.words.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
    if (token.size() < 2 || token[0] != '-' || LooksLikeNegativeNumber(token)) {
      out.words.push_back(token);
      continue;
    }
    absl::string_view body = absl::string_view(token).substr(token[1] == '-' ? 2 : 1);
    if (body == "help" || body == "h") {
      out.help = true;
      continue;
    }
    if (body == "version") {
      out.version = true;
      continue;
    }
    std::string name(body.substr(0, body.find('=')));
    const bool has_value = body.find('=') != absl::string_view::npos;
    absl::CommandLineFlag* flag = FindFlag(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = FindFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) {
        out.flags.emplace_back(name.substr(2), "false");
        continue;
      }
    }
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, " (see 'placectl help')"));
    }
    if (has_value) {
      out.flags.emplace_back(name, std::string(body.substr(body.find('=') + 1)));
    } else if (flag->IsOfType<bool>()) {
      out.flags.emplace_back(name, "true");
    } else if (i + 1 < argv.size()) {
      out.flags.emplace_back(name, argv[++i]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
    }
  }
  return out;
}

absl::StatusOr<std::pair<const CommandSpec*, size_t>> FindCommand(
    const std::vector<CommandSpec>& table, const Args& words) {
  if (words.empty()) return absl::InvalidArgumentError("no command given");
  const CommandSpec* best = nullptr;
  size_t best_len = 0;
  bool is_group = false;
  for (const CommandSpec& spec : table) {
    std::vector<std::string> paths = spec.aliases;
    paths.push_back(spec.path);
    for (const std::string& path : paths) {
      std::vector<std::string> parts = absl::StrSplit(path, ' ');
      if (parts[0] == words[0] && parts.size() > 1) is_group = true;
      if (parts.size() > words.size() || parts.size() <= best_len) continue;
      if (std::equal(parts.begin(), parts.end(), words.begin())) {
        best = &spec;
        best_len = parts.size();
      }
    }
  }
  if (best != nullptr) return std::make_pair(best, best_len);
  if (is_group && words.size() == 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", words[0], "' needs a subcommand (see 'placectl help ", words[0], "')"));
  }
  if (is_group) {
    return absl::InvalidArgumentError(absl::StrCat("unknown ", words[0], " command '", words[1],
                                                   "' (see 'placectl help ", words[0], "')"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown command '", words[0], "' (see 'placectl help')"));
}

absl::Status CheckInvocation(const CommandSpec& spec, const SplitCommandLine& line,
                             const Args& operands) {
  for (const auto& [name, value] : line.flags) {
    const auto& global = GlobalFlags();
    if (std::find(global.begin(), global.end(), name) != global.end()) continue;
    if (std::find(spec.flags.begin(), spec.flags.end(), name) != spec.flags.end()) continue;
    return absl::InvalidArgumentError(absl::StrCat("--", name, " does not apply to ", Words(spec),
                                                   " (see 'placectl help ", spec.path, "')"));
  }
  const int n = static_cast<int>(operands.size());
  if (n < spec.min_operands) {
    return absl::InvalidArgumentError(
        absl::StrCat(Words(spec), " needs ", spec.operands, ": got ",
                     Plural(operands.size(), "argument"), ", expected ",
                     spec.max_operands == spec.min_operands ? "" : "at least ", spec.min_operands));
  }
  if (spec.max_operands >= 0 && n > spec.max_operands) {
    Args extra(operands.begin() + spec.max_operands, operands.end());
    if (spec.max_operands == 0) {
      return absl::InvalidArgumentError(absl::StrCat(Words(spec), " takes no arguments, got '",
                                                     absl::StrJoin(extra, "' '"), "'"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        Words(spec), " takes ", spec.operands, " (", Plural(spec.max_operands, "argument"),
        "); unexpected extra '", absl::StrJoin(extra, "' '"), "'"));
  }
  return absl::OkStatus();
}

absl::Status ApplyFlags(const SplitCommandLine& line) {
  for (const auto& [name, value] : line.flags) {
    absl::CommandLineFlag* flag = FindFlag(name);
    std::string error;
    if (flag == nullptr || !flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("invalid value '", value, "' for --", name, ": ", error));
    }
  }
  return absl::OkStatus();
}

std::string UsageLine(const CommandSpec& spec) {
  std::string line = absl::StrCat("usage: placectl ", spec.path);
  if (!spec.operands.empty()) absl::StrAppend(&line, " ", spec.operands);
  if (!spec.flags.empty()) absl::StrAppend(&line, " [flags]");
  return line;
}

std::string CommandHelp(const CommandSpec& spec) {
  std::string out = absl::StrCat(UsageLine(spec), "\n\n", spec.summary, "\n");
  if (!spec.details.empty()) absl::StrAppend(&out, "\n", spec.details);
  if (!spec.aliases.empty()) {
    absl::StrAppend(&out, "\nalso spelled: ", absl::StrJoin(spec.aliases, ", "), "\n");
  }
  auto describe = [&out](const std::string& name) {
    absl::CommandLineFlag* flag = FindFlag(name);
    if (flag == nullptr) {
      absl::StrAppend(&out, "  --", name, "\n");
      return;
    }
    absl::StrAppend(&out, "  --", name,
                    " (default: ", flag->DefaultValue().empty() ? "\"\"" : flag->DefaultValue(),
                    ")\n      ", flag->Help(), "\n");
  };
  if (!spec.flags.empty()) {
    absl::StrAppend(&out, "\nflags:\n");
    for (const std::string& name : spec.flags) describe(name);
  }
  absl::StrAppend(&out, "\nglobal flags:\n");
  for (const std::string& name : GlobalFlags()) describe(name);
  return out;
}

std::string CommandList(const std::vector<CommandSpec>& table, absl::string_view prefix) {
  std::vector<std::pair<std::string, std::string>> rows;
  size_t width = 0;
  for (const CommandSpec& spec : table) {
    if (!prefix.empty() && spec.path != prefix &&
        !absl::StartsWith(spec.path, absl::StrCat(prefix, " "))) {
      continue;
    }
    std::string left =
        spec.operands.empty() ? spec.path : absl::StrCat(spec.path, " ", spec.operands);
    width = std::max(width, left.size());
    rows.emplace_back(std::move(left), spec.summary);
  }
  std::string out;
  for (const auto& [left, summary] : rows) {
    absl::StrAppend(&out, "  ", left, std::string(width - left.size() + 2, ' '), summary, "\n");
  }
  return out;
}

}  // namespace placement::placectl
