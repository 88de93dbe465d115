// placectl top: a live view of one daemon, like nvidia-smi -- a status line,
// one row per device (memory bar, bytes in use / limit, shards held), the
// counts of meshes, tensors and open prefetch streams, the uploads,
// downloads and prefetch streams in flight with their rates, and the
// largest tensors, and the shard views open (ViewService). Each frame is five
// unary calls (GetStatus, ListDevices, ListStreams, List, ListExports); a stream's rate is its
// bytes between two frames over the time between them (its first frame: since it opened).
//
// On a terminal each frame replaces the previous one and fits the
// terminal (lines cut at its width, the tensor list cut at its height); a
// resize redraws at once, and 'q' quits (TerminalSession).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "placement/client/tensors.h"
#include "placement/client/views.h"
#include "tools/placectl/commands.h"
#include "tools/placectl/names.h"
#include "tools/placectl/output.h"
#include "tools/placectl/tensor_output.h"
#include "tools/placectl/terminal.h"

ABSL_FLAG(bool, once, false, "top: print one frame and exit.");
ABSL_FLAG(int64_t, iterations, 0, "top: print this many frames and exit; 0 = until interrupted.");
ABSL_FLAG(absl::Duration, interval, absl::Seconds(1), "top: time between frames.");
ABSL_FLAG(int64_t, top_tensors, 10, "top: how many of the largest tensors to list.");

namespace placement::placectl {
namespace {

struct Frame {
  absl::Time taken;
  client::DaemonStatus status;
  std::vector<client::Device> devices;
  std::vector<client::StreamStatus> streams;
  std::vector<client::TensorInfo> tensors;
  client::ExportList exports;  // empty from a daemon without ViewService
};

absl::StatusOr<Frame> Fetch(const client::Client& client) {
  Frame frame;
  auto status = client.GetStatus();
  if (!status.ok()) return status.status();
  frame.status = *std::move(status);
  auto devices = client.ListDevices();
  if (!devices.ok()) return devices.status();
  frame.devices = *std::move(devices);
  auto streams = client.ListStreams();
  if (!streams.ok()) return streams.status();
  frame.streams = *std::move(streams);
  auto tensors = client::TensorClient(client).List();
  if (!tensors.ok()) return tensors.status();
  frame.tensors = *std::move(tensors);
  if (auto exports = client::ListExports(client); exports.ok()) {
    frame.exports = *std::move(exports);
  } else if (!absl::IsUnimplemented(exports.status())) {
    return exports.status();
  }
  frame.taken = absl::Now();
  return frame;
}

// Bytes per second of each stream of `frame`: since `previous` for the
// streams it had, else since the stream opened.
std::map<int64_t, double> Rates(const Frame& frame, const Frame* previous) {
  std::map<int64_t, std::pair<int64_t, absl::Time>> before;
  if (previous != nullptr) {
    for (const auto& s : previous->streams) before[s.id] = {s.bytes, previous->taken};
  }
  std::map<int64_t, double> rates;
  for (const auto& s : frame.streams) {
    auto it = before.find(s.id);
    const int64_t from = it == before.end() ? 0 : it->second.first;
    const absl::Time since = it == before.end() ? s.opened : it->second.second;
    const double seconds = std::max(absl::ToDoubleSeconds(frame.taken - since), 1e-3);
    rates[s.id] = static_cast<double>(s.bytes - from) / seconds;
  }
  return rates;
}

std::string MegabytesPerSecond(double bytes_per_second) {
  return absl::StrFormat("%.1f MB/s", bytes_per_second / 1e6);
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

std::string StreamRows(const Frame& frame, const Frame* previous) {
  if (frame.streams.empty()) return "";
  const std::map<int64_t, double> rates = Rates(frame, previous);
  std::vector<std::vector<std::string>> rows = {
      {"STREAM", "KIND", "WHAT", "TENANT", "MOVED", "RATE", "ETA"}};
  for (const client::StreamStatus& s : frame.streams) {
    const double rate = rates.at(s.id);
    std::string moved = HumanBytes(s.bytes);
    std::string eta = "-";
    if (s.total_bytes > 0) {
      absl::StrAppend(&moved, " / ", HumanBytes(s.total_bytes),
                      absl::StrFormat(" (%.0f%%)", 100.0 * s.bytes / s.total_bytes));
      if (rate > 0 && s.bytes < s.total_bytes) {
        eta = absl::StrFormat("%.0fs", (s.total_bytes - s.bytes) / rate);
      }
    }
    rows.push_back({absl::StrCat(s.id), std::string(client::StreamKindName(s.kind)),
                    s.what.empty() ? "-" : s.what, s.tenant.empty() ? "-" : s.tenant, moved,
                    MegabytesPerSecond(rate), eta});
  }
  return absl::StrCat("\n", FormatTable(rows));
}

// `text` cut to `columns` per line and `rows` lines (a terminal's size).
std::string Fit(const std::string& text, TerminalSize size) {
  std::string out;
  int lines = 0;
  size_t start = 0;
  while (start < text.size() && lines < size.rows - 1) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    if (static_cast<int>(line.size()) > size.columns) line.resize(size.columns);
    absl::StrAppend(&out, line, "\n");
    ++lines;
    start = end + 1;
  }
  return out;
}

std::string Render(const Frame& frame, const Frame* previous, int64_t top_tensors) {
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
      &out, absl::StrFormat("\nmeshes: %d   tensors: %d (%s on devices)   prefetch streams: %d"
                            "   transfers in flight: %d\n",
                            st.num_meshes, st.num_tensors, HumanBytes(st.device_bytes_in_use),
                            st.num_prefetch_streams, frame.streams.size()));
  int64_t viewed = 0;
  for (const client::ExportInfo& e : frame.exports.exports) viewed += e.size_bytes;
  absl::StrAppend(
      &out, absl::StrFormat("views: %d open (%s viewed in place)   since start: %d "
                            "exports, %s\n",
                            frame.exports.exports.size(), HumanBytes(viewed),
                            frame.exports.exports_total, HumanBytes(frame.exports.bytes_total)));
  absl::StrAppend(&out, StreamRows(frame, previous));
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
                      ",\"streams\":", ToJson(frame.streams),
                      ",\"tensors\":", ToJson(frame.tensors),
                      absl::StrFormat(",\"views\":{\"open\":%d,\"exports_total\":%d,"
                                      "\"bytes_total\":%d}",
                                      frame.exports.exports.size(), frame.exports.exports_total,
                                      frame.exports.bytes_total),
                      "}\n");
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
  std::unique_ptr<TerminalSession> terminal = TerminalSession::Start();
  std::optional<Frame> previous;
  for (int64_t i = 0; iterations == 0 || i < iterations; ++i) {
    if (i > 0) {
      // Until the next frame is due: 'q' quits, a resize redraws the last
      // frame at the new size at once, a signal ends the view.
      for (bool waiting = true; waiting;) {
        switch (terminal->Wait(absl::GetFlag(FLAGS_interval))) {
          case TerminalSession::Event::kQuit:
            return 0;
          case TerminalSession::Event::kInterrupt:
            return 130;
          case TerminalSession::Event::kResize:
            if (redraw && previous.has_value()) {
              std::string text = Fit(Render(*previous, nullptr, absl::GetFlag(FLAGS_top_tensors)),
                                     SizeOf(STDOUT_FILENO));
              std::fputs("\x1b[H\x1b[2J", stdout);
              std::fputs(text.c_str(), stdout);
              std::fflush(stdout);
            }
            break;
          case TerminalSession::Event::kTimeout:
            waiting = false;
            break;
        }
      }
    }
    absl::StatusOr<Frame> frame = Fetch(*client);
    if (!frame.ok()) return ReportError(frame.status());
    std::string text = session.json() ? RenderJson(*frame)
                                      : Render(*frame, previous.has_value() ? &*previous : nullptr,
                                               absl::GetFlag(FLAGS_top_tensors));
    if (redraw) {
      text = Fit(text, SizeOf(STDOUT_FILENO));
      std::fputs("\x1b[H\x1b[2J", stdout);
    }
    if (!redraw && !session.json() && i > 0) std::fputs("\n", stdout);
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    previous = *std::move(frame);
  }
  return 0;
}

}  // namespace placement::placectl
