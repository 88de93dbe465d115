#include "common/partition_spec_text.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace placement {
namespace {

// Strips surrounding whitespace and one pair of matching quotes.
std::string CleanName(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    s = s.substr(1, s.size() - 2);
  }
  return std::string(absl::StripAsciiWhitespace(s));
}

// Splits `text` on commas that are not inside parentheses.
absl::StatusOr<std::vector<std::string>> SplitTopLevel(absl::string_view text,
                                                       absl::string_view whole) {
  std::vector<std::string> parts;
  int depth = 0;
  std::string current;
  for (char c : text) {
    if (c == '(') {
      if (++depth > 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("spec '", whole, "': nested tuples are not allowed"));
      }
    } else if (c == ')') {
      if (--depth < 0) {
        return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "': unbalanced ')'"));
      }
    }
    if (c == ',' && depth == 0) {
      parts.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "': unbalanced '('"));
  }
  parts.push_back(current);
  return parts;
}

absl::StatusOr<std::vector<std::string>> ParseEntry(absl::string_view entry,
                                                    absl::string_view whole, size_t index) {
  std::string e(absl::StripAsciiWhitespace(entry));
  if (e.empty() || e == "None" || e == "none" || e == "()") return std::vector<std::string>{};
  std::vector<std::string> axes;
  if (e.front() == '(') {
    if (e.back() != ')') {
      return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "' entry ", index, " ('", e,
                                                     "'): expected ')' at the end"));
    }
    for (const auto& piece : absl::StrSplit(e.substr(1, e.size() - 2), ',')) {
      std::string name = CleanName(piece);
      if (name.empty()) continue;  // ("x",) is a one-axis tuple
      axes.push_back(std::move(name));
    }
    if (axes.empty()) return axes;
  } else {
    axes.push_back(CleanName(e));
  }
  for (const auto& name : axes) {
    if (name.empty() || name == "None" || name.find_first_of("() \t'\"") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("spec '", whole, "' entry ", index, " ('", e,
                                                     "'): '", name, "' is not an axis name"));
    }
  }
  return axes;
}

}  // namespace

absl::StatusOr<PartitionSpec> ParsePartitionSpec(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  if ((absl::StartsWith(s, "P(") || absl::StartsWith(s, "PartitionSpec(")) &&
      absl::EndsWith(s, ")")) {
    s = s.substr(s.find('(') + 1);
    s.remove_suffix(1);
    s = absl::StripAsciiWhitespace(s);
  }
  PartitionSpec spec;
  if (s.empty()) return spec;
  auto parts = SplitTopLevel(s, text);
  if (!parts.ok()) return parts.status();
  // A trailing comma ("data,") adds no entry, as in Python.
  if (parts->size() > 1 && absl::StripAsciiWhitespace(parts->back()).empty()) parts->pop_back();
  for (size_t i = 0; i < parts->size(); ++i) {
    auto entry = ParseEntry((*parts)[i], text, i);
    if (!entry.ok()) return entry.status();
    spec.dims.push_back(*std::move(entry));
  }
  return spec;
}

}  // namespace placement
