// placectl top: a live view of one daemon, like nvidia-smi -- a status line,
// one row per device (memory bar, bytes in use / limit, shards held), the
// counts of meshes, tensors and open prefetch streams, and the largest
// tensors. Each frame is three unary calls (GetStatus, ListDevices, List).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "placement/client/tensors.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/names.h"
#include "tools/placectl/output.h"
#include "tools/placectl/tensor_output.h"

ABSL_FLAG(bool, once, false, "top: print one frame and exit.");
ABSL_FLAG(int64_t, iterations, 0, "top: print this many frames and exit; 0 = until interrupted.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "top: time between frames.");
ABSL_FLAG(int64_t, top_tensors, 10, "top: how many of the largest tensors to list.");

namespace placement::placectl {
namespace {

struct Frame {
  client::DaemonStatus status;
  std::vector<client::Device> devices;
  std::vector<client::TensorInfo> tensors;
};

absl::StatusOr<Frame> Fetch(const client::Client& client) {
  Frame frame;
  auto status = client.GetStatus();
  if (!status.ok()) return status.status();
  frame.status = *std::move(status);
  auto devices = client.ListDevices();
  if (!devices.ok()) return devices.status();
  frame.devices = *std::move(devices);
  auto tensors = client::TensorClient(client).List();
  if (!tensors.ok()) return tensors.status();
  frame.tensors = *std::move(tensors);
  return frame;
}

std::string Bar(int64_t used, int64_t limit, int width) {
  int filled = limit > 0 ? static_cast<int>(std::min<int64_t>(width, used * width / limit)) : 0;
  if (used > 0 && filled == 0) filled = 1;
  return absl::StrCat("[", std::string(filled, '#'), std::string(width - filled, '.'), "]");
}

std::string Uptime(absl::Duration d) {
  int64_t s = absl::ToInt64Seconds(d);
  if (s >= 3600) return absl::StrFormat("%dh%02dm%02ds", s / 3600, s / 60 % 60, s % 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  return absl::StrFormat("%ds", s);
}

std::string Render(const Frame& frame, int64_t top_tensors) {
  const client::DaemonStatus& st = frame.status;
  std::string out = absl::StrFormat(
      "placementd %s  %s  backend %s  up %s  %s  %s\n\n", st.version, st.listen_address, st.backend,
      Uptime(st.uptime), st.serving ? "serving" : "draining",
      absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()));
  std::map<int64_t, std::pair<int64_t, int64_t>> shards;  // device -> (count, bytes)
  for (const auto& t : frame.tensors) {
    for (const auto& s : t.shards) {
      shards[s.device_id].first += 1;
      shards[s.device_id].second += s.size_bytes;
    }
  }
  // GPUs also show their PCI bus id, as nvidia-smi does; CPU devices have none.
  const bool bus = std::any_of(frame.devices.begin(), frame.devices.end(),
                               [](const client::Device& d) { return !d.pci_bus_id.empty(); });
  std::vector<std::vector<std::string>> rows = {
      {"DEV", "NODE", "KIND", "HARDWARE", "MEMORY", "IN USE / LIMIT", "USE", "SHARDS"}};
  if (bus) rows[0].push_back("BUS");
  for (const auto& d : frame.devices) {
    int64_t limit = d.memory_limit_bytes;
    int64_t used = d.memory_in_use_bytes;
    rows.push_back({absl::StrCat(d.id), absl::StrCat(d.process_index), d.device_kind,
                    HardwareName(d.hardware_type), Bar(used, limit, 20),
                    absl::StrCat(HumanBytes(used), " / ", HumanBytes(limit)),
                    limit > 0 ? absl::StrFormat("%.0f%%", 100.0 * used / limit) : "-",
                    absl::StrCat(shards[d.id].first)});
    if (bus) rows.back().push_back(d.pci_bus_id);
  }
  absl::StrAppend(&out, FormatTable(rows));
  absl::StrAppend(
      &out, absl::StrFormat("\nmeshes: %d   tensors: %d (%s on devices)   prefetch streams: %d\n",
                            st.num_meshes, st.num_tensors, HumanBytes(st.device_bytes_in_use),
                            st.num_prefetch_streams));
  std::vector<const client::TensorInfo*> largest;
  for (const auto& t : frame.tensors) largest.push_back(&t);
  std::sort(largest.begin(), largest.end(),
            [](const client::TensorInfo* a, const client::TensorInfo* b) {
              return a->device_bytes != b->device_bytes ? a->device_bytes > b->device_bytes
                                                        : a->id < b->id;
            });
  if (static_cast<int64_t>(largest.size()) > top_tensors) largest.resize(top_tensors);
  if (!largest.empty()) {
    std::vector<std::vector<std::string>> trows = {
        {"TENSOR", "NAME", "ARRAY", "PLACEMENT", "DEVICE BYTES"}};
    for (const client::TensorInfo* t : largest) {
      trows.push_back({t->id, t->name, client::DescribeArray(t->dtype, t->shape), PlacementText(*t),
                       HumanBytes(t->device_bytes)});
    }
    absl::StrAppend(&out, "\n", FormatTable(trows));
  }
  return out;
}

std::string RenderJson(const Frame& frame) {
  return absl::StrCat("{\"status\":", ToJson(frame.status), ",\"devices\":", ToJson(frame.devices),
                      ",\"tensors\":", ToJson(frame.tensors), "}\n");
}

}  // namespace

int RunTop(Session& session, const Args&) {
  if (session.Given("once") && session.Given("iterations")) {
    return session.UsageError("give --once or --iterations, not both");
  }
  int64_t iterations = absl::GetFlag(FLAGS_once) ? 1 : absl::GetFlag(FLAGS_iterations);
  if (iterations < 0) return session.UsageError("--iterations must be >= 0");
  if (absl::GetFlag(FLAGS_interval) < absl::ZeroDuration()) {
    return session.UsageError("--interval must not be negative");
  }
  if (absl::GetFlag(FLAGS_top_tensors) < 0) return session.UsageError("--top_tensors must be >= 0");
  const client::Client* client = session.client();
  if (client == nullptr) return 1;
  // Redraw in place only on a terminal; piped output gets frames one after
  // another.
  const bool redraw = !session.json() && ::isatty(STDOUT_FILENO) == 1;
  for (int64_t i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) absl::SleepFor(absl::GetFlag(FLAGS_interval));
    absl::StatusOr<Frame> frame = Fetch(*client);
    if (!frame.ok()) return ReportError(frame.status());
    std::string text =
        session.json() ? RenderJson(*frame) : Render(*frame, absl::GetFlag(FLAGS_top_tensors));
    if (redraw) std::fputs("\x1b[H\x1b[2J", stdout);
    if (!redraw && !session.json() && i > 0) std::fputs("\n", stdout);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace placement::placectl
