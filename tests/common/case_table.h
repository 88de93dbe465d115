// The "case ... end" text tables that the JAX conformance generators write
// (scripts/gen_sharding_conformance.py, scripts/gen_process_local_conformance.py;
// each table documents its own tags). This header reads the block structure and
// the field kinds both tables share; each test parses its own tags.
#ifndef PLACEMENT_TESTS_COMMON_CASE_TABLE_H_
#define PLACEMENT_TESTS_COMMON_CASE_TABLE_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/mesh.h"
#include "common/region.h"
#include "common/sharding.h"
#include "gtest/gtest.h"

namespace placement::case_table {

// Whitespace-separated fields of one line; fields[0] is the tag.
inline std::vector<std::string> Fields(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> fields;
  for (std::string field; in >> field;) fields.push_back(field);
  return fields;
}

inline std::vector<std::string> SplitOn(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, separator)) parts.push_back(part);
  return parts;
}

// "3:7" -> [3, 7).
inline IndexRange ParseRange(const std::string& text) {
  const size_t colon = text.find(':');
  return {std::stoll(text.substr(0, colon)), std::stoll(text.substr(colon + 1))};
}

// The integers in fields[first..].
inline std::vector<int64_t> ParseInts(const std::vector<std::string>& f, size_t first = 1) {
  std::vector<int64_t> out;
  for (size_t i = first; i < f.size(); ++i) out.push_back(std::stoll(f[i]));
  return out;
}

// "mesh x=2 y=4".
inline std::vector<MeshAxis> ParseMeshAxes(const std::vector<std::string>& f) {
  std::vector<MeshAxis> axes;
  for (size_t i = 1; i < f.size(); ++i) {
    const size_t eq = f[i].find('=');
    axes.push_back({f[i].substr(0, eq), std::stoll(f[i].substr(eq + 1))});
  }
  return axes;
}

// "spec x,y - z": one field per dimension, "-" for replicated.
inline PartitionSpec ParseSpec(const std::vector<std::string>& f) {
  PartitionSpec spec;
  for (size_t i = 1; i < f.size(); ++i) {
    spec.dims.push_back(f[i] == "-" ? std::vector<std::string>{} : SplitOn(f[i], ','));
  }
  return spec;
}

// Reads every "case ..." to "end" block of `path` into a Case (which must have
// `std::string name` and `int line`, set here to the case line and its number).
// Blank lines and '#' comments are skipped. Every other line inside a block
// goes to on_line(Case&, fields, line), which returns false for a tag it does
// not know. A malformed file fails the calling test.
template <typename Case, typename OnLine>
std::vector<Case> ParseCases(const std::string& path, OnLine on_line) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<Case> cases;
  Case* current = nullptr;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::vector<std::string> f = Fields(line);
    if (f.empty() || f[0][0] == '#') continue;
    const std::string& tag = f[0];
    if (tag == "case") {
      EXPECT_EQ(current, nullptr) << "line " << number << ": case inside a case";
      current = &cases.emplace_back();
      current->name = line;
      current->line = number;
    } else if (current == nullptr) {
      ADD_FAILURE() << "line " << number << ": '" << line << "' outside a case";
    } else if (tag == "end") {
      current = nullptr;
    } else if (!on_line(*current, f, line)) {
      ADD_FAILURE() << "line " << number << ": unknown tag '" << tag << "'";
    }
  }
  EXPECT_EQ(current, nullptr) << "file ends inside a case";
  return cases;
}

}  // namespace placement::case_table

#endif  // PLACEMENT_TESTS_COMMON_CASE_TABLE_H_
