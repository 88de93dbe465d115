#include "bench/cluster_daemons.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace placement::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A free TCP port on 127.0.0.1 (bound and released).
int PickFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string DefaultPlacementd() {
  if (const char* bin = std::getenv("PLACEMENTD_BIN"); bin != nullptr && *bin != '\0') return bin;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "placementd" : (self.parent_path() / "placementd").string();
}

// fork + exec with stdout/stderr to `log`; the child dies with this process.
pid_t Spawn(const std::vector<std::string>& argv, const std::string& log) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, STDOUT_FILENO);
  dup2(out, STDERR_FILENO);
  const int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, STDIN_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(args[0], args.data());
  _exit(127);
}

// Waits up to `timeout` for `pid` to exit; false if it did not.
bool WaitExit(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return true;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterDaemons>> ClusterDaemons::Start(
    const ClusterDaemonsOptions& options) {
  std::unique_ptr<ClusterDaemons> c(new ClusterDaemons());
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern =
      absl::StrCat(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "/cluster-bench-XXXXXX");
  if (mkdtemp(pattern.data()) == nullptr) return absl::InternalError("mkdtemp failed");
  c->dir_ = pattern;
  const std::string binary = options.placementd.empty() ? DefaultPlacementd() : options.placementd;
  if (access(binary.c_str(), X_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("placementd not found at ", binary,
                                            " (build it, or pass --placementd / $PLACEMENTD_BIN)"));
  }
  const std::string coordinator = absl::StrCat("127.0.0.1:", PickFreePort());
  for (int i = 0; i < options.num_processes; ++i) {
    Daemon d;
    d.ready_path = absl::StrCat(c->dir_, "/ready.", i);
    d.stderr_path = absl::StrCat(c->dir_, "/log.", i);
    std::vector<std::string> argv = {
        binary,
        "--listen=127.0.0.1:0",
        "--ready_file=" + d.ready_path,
        "--backend=cpu",
        absl::StrCat("--cpu_devices=", options.devices_per_process),
        absl::StrCat("--cpu_device_memory=", options.device_memory),
        "--drain_timeout=5s",
        "--log_level=warning",
    };
    if (!options.lone) {
      for (std::string flag : {absl::StrCat("--num_processes=", options.num_processes),
                               absl::StrCat("--process_index=", i), "--coordinator=" + coordinator,
                               std::string("--cluster_init_timeout=120s")}) {
        argv.push_back(std::move(flag));
      }
    }
    for (const std::string& f : options.extra_flags) argv.push_back(f);
    d.pid = Spawn(argv, d.stderr_path);
    if (d.pid < 0) return absl::InternalError("fork failed");
    c->daemons_.push_back(std::move(d));
  }
  const absl::Time deadline = absl::Now() + options.start_timeout;
  for (int i = 0; i < options.num_processes; ++i) {
    Daemon& d = c->daemons_[i];
    while (true) {
      const std::string ready = ReadFile(d.ready_path);
      if (absl::StrContains(ready, "\n")) {
        for (absl::string_view line : absl::StrSplit(ready, '\n')) {
          if (d.address.empty()) {
            d.address = std::string(line);
          } else if (absl::ConsumePrefix(&line, "peer=")) {
            d.peer_address = std::string(line);
          }
        }
        break;
      }
      int status = 0;
      if (waitpid(d.pid, &status, WNOHANG) == d.pid) {
        d.pid = -1;
        return absl::InternalError(
            absl::StrCat("placementd ", i, " exited before it was ready: ", c->Stderr(i)));
      }
      if (absl::Now() > deadline) {
        return absl::DeadlineExceededError(
            absl::StrCat("placementd ", i, " not ready: ", c->Stderr(i)));
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
  }
  return c;
}

ClusterDaemons::~ClusterDaemons() {
  for (const Daemon& d : daemons_) {
    if (d.pid > 0) kill(d.pid, SIGTERM);
  }
  for (const Daemon& d : daemons_) {
    if (d.pid > 0 && !WaitExit(d.pid, absl::Seconds(15))) {
      kill(d.pid, SIGKILL);
      WaitExit(d.pid, absl::Seconds(5));
    }
  }
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string ClusterDaemons::Stderr(int i) const { return ReadFile(daemons_[i].stderr_path); }

}  // namespace placement::bench
