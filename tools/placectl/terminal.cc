#include "tools/placectl/terminal.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

#include "absl/time/clock.h"

namespace placement::placectl {
namespace {

// The self-pipe: signal handlers write one byte naming the signal.
int pipe_fds[2] = {-1, -1};

extern "C" void OnSignal(int signal) {
  const int saved = errno;
  const char byte = static_cast<char>(signal);
  (void)!write(pipe_fds[1], &byte, 1);
  errno = saved;
}

constexpr int kSignals[] = {SIGWINCH, SIGINT, SIGTERM, SIGHUP};

}  // namespace

TerminalSize SizeOf(int fd) {
  winsize size{};
  if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0 || size.ws_row == 0) return {};
  return {size.ws_col, size.ws_row};
}

std::unique_ptr<TerminalSession> TerminalSession::Start() {
  std::unique_ptr<TerminalSession> session(new TerminalSession());
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return session;
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : kSignals) sigaction(signal, &action, nullptr);
  if (isatty(STDIN_FILENO) == 1 && tcgetattr(STDIN_FILENO, &session->saved_) == 0) {
    termios raw = session->saved_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 1;
    raw.c_cc[VTIME] = 0;
    session->raw_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  return session;
}

TerminalSession::~TerminalSession() {
  if (raw_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  for (int signal : kSignals) sigaction(signal, &action, nullptr);
  for (int& fd : pipe_fds) {
    if (fd >= 0) close(fd);
    fd = -1;
  }
}

TerminalSession::Event TerminalSession::Wait(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    pollfd fds[2] = {{pipe_fds[0], POLLIN, 0}, {STDIN_FILENO, POLLIN, 0}};
    const nfds_t n = raw_ && stdin_open_ ? 2 : 1;
    const int64_t ms = std::max<int64_t>(0, absl::ToInt64Milliseconds(deadline - absl::Now()));
    const int ready = poll(fds, n, static_cast<int>(ms));
    if (ready < 0 && errno == EINTR) continue;  // the pipe has the signal
    if (ready <= 0) return Event::kTimeout;
    if (fds[0].revents & POLLIN) {
      char signal = 0;
      Event event = Event::kTimeout;
      while (read(pipe_fds[0], &signal, 1) == 1) {
        if (signal != SIGWINCH) return Event::kInterrupt;
        event = Event::kResize;
      }
      if (event == Event::kResize) return event;
    }
    if (n == 2 && (fds[1].revents & (POLLIN | POLLHUP))) {
      char key = 0;
      const ssize_t got = read(STDIN_FILENO, &key, 1);
      if (got <= 0) {
        stdin_open_ = false;  // closed: keys can no longer come
        continue;
      }
      if (key == 'q' || key == 'Q') return Event::kQuit;
    }
    if (absl::Now() >= deadline) return Event::kTimeout;
  }
}

}  // namespace placement::placectl
