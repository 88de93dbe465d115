// TerminalSession: what an interactive placectl view (top) needs from the
// terminal while it runs:
//   - keys without Enter: stdin, when it is a terminal, is switched to
//     non-canonical, no-echo mode, and restored when the session ends (also
//     when SIGINT / SIGTERM / SIGHUP end the view: they are caught and
//     reported as kInterrupt instead of killing the process mid-mode);
//   - resizes: SIGWINCH is caught and reported as kResize.
// Signals reach Wait() through a self-pipe, so no event is lost between
// checks. At most one session exists at a time (it owns the process's
// handlers for those signals).
//
// Not thread-safe: one thread creates it and calls Wait.
#ifndef PLACEMENT_TOOLS_PLACECTL_TERMINAL_H_
#define PLACEMENT_TOOLS_PLACECTL_TERMINAL_H_

#include <termios.h>

#include <memory>

#include "absl/time/time.h"

namespace placement::placectl {

// The size of the terminal behind `fd`; {80, 24} when it is not one.
struct TerminalSize {
  int columns = 80;
  int rows = 24;
};
TerminalSize SizeOf(int fd);

class TerminalSession {
 public:
  // Installs the handlers; raw mode only when stdin is a terminal.
  static std::unique_ptr<TerminalSession> Start();
  ~TerminalSession();
  TerminalSession(const TerminalSession&) = delete;
  TerminalSession& operator=(const TerminalSession&) = delete;

  enum class Event {
    kTimeout,    // nothing happened for `timeout`
    kQuit,       // 'q' or 'Q' was typed (or stdin reached its end)
    kResize,     // SIGWINCH
    kInterrupt,  // SIGINT, SIGTERM or SIGHUP
  };
  // Waits up to `timeout` for a key, a resize or a signal. Other keys are
  // read and ignored.
  Event Wait(absl::Duration timeout);
  // Whether keys are read (stdin is a terminal).
  bool reads_keys() const { return raw_; }

 private:
  TerminalSession() = default;

  bool raw_ = false;
  bool stdin_open_ = true;
  termios saved_{};
};

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_TERMINAL_H_
