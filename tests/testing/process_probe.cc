#include "tests/testing/process_probe.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace placement::testing {

namespace {

// A "Key:   N kB" line of /proc/<pid>/status in bytes, or -1.
int64_t StatusBytes(pid_t pid, absl::string_view key) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, key)) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, " kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(rest, &kib)) return kib * 1024;
  }
  return -1;
}

}  // namespace

int64_t ResidentBytes(pid_t pid) { return StatusBytes(pid, "VmRSS:"); }

namespace {

// Resident bytes of the mappings of `pid` whose name starts with `prefix`.
int64_t ResidentBytesOfMappings(pid_t pid, absl::string_view prefix) {
  std::ifstream smaps(absl::StrCat("/proc/", pid, "/smaps"));
  std::string line;
  bool counting = false;
  int64_t total = 0;
  while (std::getline(smaps, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "Rss:")) {
      if (!counting) continue;
      rest = absl::StripAsciiWhitespace(rest);
      absl::ConsumeSuffix(&rest, " kB");
      int64_t kib = 0;
      if (absl::SimpleAtoi(rest, &kib)) total += kib * 1024;
      continue;
    }
    // A mapping's header: "start-end perms offset dev inode [name]".
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash == std::string::npos || space == std::string::npos || dash > space) continue;
    if (!std::all_of(line.begin(), line.begin() + static_cast<int64_t>(space), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == '-';
        })) {
      continue;
    }
    const size_t name = line.find('/');
    counting =
        name != std::string::npos && absl::StartsWith(absl::string_view(line).substr(name), prefix);
  }
  return total;
}

}  // namespace

int64_t OwnResidentBytes(pid_t pid) {
  const int64_t rss = StatusBytes(pid, "VmRSS:");
  const int64_t shared = StatusBytes(pid, "RssShmem:");
  if (rss < 0 || shared < 0) return -1;
  // The CPU platform's device blocks of 256 KiB and more are memory files of
  // the daemon's own (exportable as views): shared memory, but the daemon's.
  return rss - shared + ResidentBytesOfMappings(pid, "/memfd:placementd-device");
}

int64_t OpenFds(pid_t pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return -1;
  int64_t count = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++count;
  }
  closedir(dir);
  return count;
}

int64_t Mappings(pid_t pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  if (!maps.good()) return -1;
  int64_t count = 0;
  std::string line;
  while (std::getline(maps, line)) ++count;
  return count;
}

int64_t FileMappings(pid_t pid) {
  std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
  if (!maps.good()) return -1;
  int64_t count = 0;
  std::string line;
  while (std::getline(maps, line)) {
    if (absl::StrContains(line, "/memfd:") || absl::StrContains(line, "/dev/shm/")) ++count;
  }
  return count;
}

std::string LargestMappings(pid_t pid, int n) {
  std::ifstream smaps(absl::StrCat("/proc/", pid, "/smaps"));
  std::vector<std::pair<int64_t, std::string>> mappings;
  std::string line;
  std::string header;
  while (std::getline(smaps, line)) {
    absl::string_view rest = line;
    // A mapping's header: "start-end perms offset dev inode [name]".
    const size_t dash = line.find('-');
    const size_t space = line.find(' ');
    if (dash != std::string::npos && space != std::string::npos && dash < space &&
        std::all_of(line.begin(), line.begin() + static_cast<int64_t>(space), [](char c) {
          return std::isxdigit(static_cast<unsigned char>(c)) || c == '-';
        })) {
      header = line;
      continue;
    }
    if (!absl::ConsumePrefix(&rest, "Rss:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, " kB");
    int64_t kib = 0;
    if (absl::SimpleAtoi(rest, &kib)) mappings.emplace_back(kib, header);
  }
  std::sort(mappings.begin(), mappings.end(), std::greater<>());
  std::string out;
  for (int i = 0; i < n && i < static_cast<int>(mappings.size()); ++i) {
    absl::StrAppend(&out, mappings[i].first, " kB  ", mappings[i].second, "\n");
  }
  return out;
}

std::string HttpGet(int port, const std::string& path) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval timeout{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  std::string response;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
    const std::string request = "GET " + path + " HTTP/1.0\r\n\r\n";
    (void)send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    char buf[8192];
    while (true) {
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      response.append(buf, static_cast<size_t>(n));
    }
  }
  close(fd);
  const size_t body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

int MetricsPort(const std::string& metrics_url) {
  absl::string_view rest = metrics_url;
  if (!absl::ConsumePrefix(&rest, "http://")) return 0;
  const size_t colon = rest.find(':');
  const size_t slash = rest.find('/');
  if (colon == absl::string_view::npos) return 0;
  int port = 0;
  return absl::SimpleAtoi(rest.substr(colon + 1, slash - colon - 1), &port) ? port : 0;
}

double MetricValue(absl::string_view exposition, absl::string_view series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, series) || !absl::ConsumePrefix(&line, " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(absl::StripAsciiWhitespace(line), &value)) return value;
  }
  return -1;
}

}  // namespace placement::testing
