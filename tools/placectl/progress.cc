#include "tools/placectl/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tools/placectl/output.h"

ABSL_FLAG(bool, quiet, false, "No progress bar on stderr for uploads and downloads.");

namespace placement::placectl {
namespace {

constexpr absl::Duration kRedrawEvery = absl::Milliseconds(100);

int TerminalWidth(std::FILE* out) {
  winsize size{};
  if (ioctl(fileno(out), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

// 1.2 GB/s (decimal, as transfer rates are quoted).
std::string Rate(double bytes_per_second) {
  if (bytes_per_second >= 1e9) return absl::StrFormat("%.1f GB/s", bytes_per_second / 1e9);
  if (bytes_per_second >= 1e6) return absl::StrFormat("%.1f MB/s", bytes_per_second / 1e6);
  return absl::StrFormat("%.0f kB/s", bytes_per_second / 1e3);
}

std::string Clock(int64_t seconds) {
  if (seconds >= 3600) {
    return absl::StrFormat("%d:%02d:%02d", seconds / 3600, seconds / 60 % 60, seconds % 60);
  }
  return absl::StrFormat("%d:%02d", seconds / 60, seconds % 60);
}

}  // namespace

bool ProgressWanted() { return !absl::GetFlag(FLAGS_quiet) && isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, bool enabled, std::FILE* out)
    : label_(std::move(label)), enabled_(enabled), out_(out), start_(absl::Now()) {}

ProgressBar::~ProgressBar() {
  if (drawn_) {
    std::fputs("\r\x1b[K", out_);
    std::fflush(out_);
  }
}

client::ProgressFn ProgressBar::Callback() {
  if (!enabled_) return nullptr;
  return [this](int64_t done, int64_t total) { Update(done, total); };
}

void ProgressBar::Update(int64_t done, int64_t total) {
  if (!enabled_) return;
  const absl::Time now = absl::Now();
  if (done < total && now - last_draw_ < kRedrawEvery) return;
  last_draw_ = now;
  const std::string line = Render(label_, done, total, now - start_, TerminalWidth(out_));
  std::fprintf(out_, "\r%s\x1b[K", line.c_str());
  std::fflush(out_);
  drawn_ = true;
}

std::string ProgressBar::Render(const std::string& label, int64_t done, int64_t total,
                                absl::Duration elapsed, int width) {
  const double seconds = std::max(absl::ToDoubleSeconds(elapsed), 1e-3);
  const double rate = static_cast<double>(done) / seconds;
  std::string eta = "--:--";
  if (done >= total) {
    eta = Clock(static_cast<int64_t>(seconds));
  } else if (rate > 0) {
    eta = Clock(static_cast<int64_t>(static_cast<double>(total - done) / rate + 0.5));
  }
  const std::string tail = absl::StrCat(HumanBytes(done), " / ", HumanBytes(total), "  ",
                                        Rate(rate), "  ", done >= total ? "in " : "ETA ", eta);
  // label  [####....]  tail: the bar takes what the label and tail leave,
  // between 10 and 40 columns; without room for it, no bar.
  const int fixed = static_cast<int>(label.size() + tail.size()) + 6;
  const int bar = std::min(40, width - 1 - fixed);
  std::string line = label;
  if (bar >= 10) {
    const int filled = total > 0 ? static_cast<int>(static_cast<double>(bar) * done / total) : bar;
    absl::StrAppend(&line, "  [", std::string(filled, '#'), std::string(bar - filled, '.'), "]");
  }
  absl::StrAppend(&line, "  ", tail);
  if (static_cast<int>(line.size()) > width - 1) line.resize(std::max(0, width - 1));
  return line;
}

}  // namespace placement::placectl
