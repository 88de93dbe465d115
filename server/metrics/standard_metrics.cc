#include "server/metrics/standard_metrics.h"

#include <dirent.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "placement_git_describe.h"

#ifndef PLACEMENT_VERSION
#define PLACEMENT_VERSION "unknown"
#endif

namespace placement::server {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The fields of /proc/self/stat after the command name (which may hold
// spaces and parentheses): field 3 (state) is element 0.
std::vector<std::string> StatFields() {
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return {};
  return absl::StrSplit(stat.substr(close + 1), ' ', absl::SkipEmpty());
}

// Seconds since the epoch at which this process started: its start time in
// clock ticks after boot (stat field 22) plus the boot time (/proc/stat
// btime). The registration time when /proc cannot say.
double StartTimeSeconds() {
  const std::vector<std::string> fields = StatFields();
  int64_t ticks = 0;
  int64_t boot = 0;
  if (fields.size() > 19 && absl::SimpleAtoi(fields[19], &ticks)) {
    std::istringstream stat(ReadFile("/proc/stat"));
    for (std::string line; std::getline(stat, line);) {
      if (line.rfind("btime ", 0) == 0 && absl::SimpleAtoi(line.substr(6), &boot)) {
        return static_cast<double>(boot) + static_cast<double>(ticks) / sysconf(_SC_CLK_TCK);
      }
    }
  }
  return absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
}

int64_t OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return 0;
  int64_t n = 0;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n - 1;  // the descriptor of `dir` itself
}

void CollectProcess(double start_time, std::vector<GaugeSample>* out) {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
    const double cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                       (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
    out->push_back({"process_cpu_seconds_total", {}, cpu});
  }
  // statm: size resident shared text lib data dt, in pages.
  const std::vector<std::string> statm =
      absl::StrSplit(ReadFile("/proc/self/statm"), ' ', absl::SkipEmpty());
  int64_t virtual_pages = 0;
  int64_t resident_pages = 0;
  if (statm.size() >= 2 && absl::SimpleAtoi(statm[0], &virtual_pages) &&
      absl::SimpleAtoi(statm[1], &resident_pages)) {
    const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
    out->push_back({"process_virtual_memory_bytes", {}, virtual_pages * page});
    out->push_back({"process_resident_memory_bytes", {}, resident_pages * page});
  }
  out->push_back({"process_open_fds", {}, static_cast<double>(OpenFds())});
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out->push_back({"process_max_fds", {}, static_cast<double>(limit.rlim_cur)});
  }
  out->push_back({"process_start_time_seconds", {}, start_time});
}

}  // namespace

void AddStandardMetrics(Metrics* metrics) {
  metrics->Describe("placementd_build_info", "gauge",
                    "Always 1; the labels say which build is running.");
  metrics->Describe("process_cpu_seconds_total", "counter",
                    "Total user and system CPU time spent in seconds.");
  metrics->Describe("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
  metrics->Describe("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.");
  metrics->Describe("process_open_fds", "gauge", "Number of open file descriptors.");
  metrics->Describe("process_max_fds", "gauge", "Maximum number of open file descriptors.");
  metrics->Describe("process_start_time_seconds", "gauge",
                    "Start time of the process since unix epoch in seconds.");
  const double start_time = StartTimeSeconds();
  const MetricLabels build = {{"version", PLACEMENT_VERSION},
                              {"revision", PLACEMENT_GIT_DESCRIBE},
                              {"grpc_version", grpc::Version()}};
  metrics->AddCollector([start_time, build](std::vector<GaugeSample>* out) {
    out->push_back({"placementd_build_info", build, 1});
    CollectProcess(start_time, out);
  });
}

}  // namespace placement::server
