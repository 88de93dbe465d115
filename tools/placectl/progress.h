// ProgressBar: what `placectl tensor put / get` shows on a terminal while
// bytes move, on stderr, redrawn in place at most every 100 ms:
//
//   upload weights.npy  [#########.........]  512.0 MiB / 1.0 GiB  1.2 GB/s  ETA 0:04
//
// Nothing is drawn when stderr is not a terminal or with --quiet (the
// caller passes `enabled`), and the line is erased once the transfer ends,
// so the command's own output follows on a clean line. The bar fits the
// terminal's width at each redraw.
//
// Not thread-safe: one transfer, on the thread that runs it (the client
// library calls ProgressFn there).
#ifndef PLACEMENT_TOOLS_PLACECTL_PROGRESS_H_
#define PLACEMENT_TOOLS_PLACECTL_PROGRESS_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/time/time.h"
#include "placement/client/tensors.h"

namespace placement::placectl {

// Whether a progress bar belongs on stderr: it is a terminal and --quiet
// was not given.
bool ProgressWanted();

class ProgressBar {
 public:
  // `label`: "upload x.npy". Draws nothing unless `enabled`.
  ProgressBar(std::string label, bool enabled, std::FILE* out = stderr);
  // Erases the line if one was drawn.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // A client::ProgressFn for this bar (valid while it lives).
  client::ProgressFn Callback();
  void Update(int64_t done, int64_t total);

  // The line drawn for `done` of `total` bytes after `elapsed`, fitted to
  // `width` columns (exposed for tests).
  static std::string Render(const std::string& label, int64_t done, int64_t total,
                            absl::Duration elapsed, int width);

 private:
  const std::string label_;
  const bool enabled_;
  std::FILE* const out_;
  const absl::Time start_;
  absl::Time last_draw_ = absl::InfinitePast();
  bool drawn_ = false;
};

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_PROGRESS_H_
