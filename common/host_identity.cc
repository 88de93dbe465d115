#include "common/host_identity.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "absl/strings/ascii.h"

namespace placement {
namespace {

std::string FirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return "";
  return std::string(absl::StripAsciiWhitespace(line));
}

}  // namespace

std::string HostId() {
  std::string id = FirstLine("/etc/machine-id");
  if (!id.empty()) return id;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return "";
  return name;
}

std::string BootId() { return FirstLine("/proc/sys/kernel/random/boot_id"); }

}  // namespace placement
