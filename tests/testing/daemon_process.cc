#include "tests/testing/daemon_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace placement::testing {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Waits for `pid` up to `timeout`; returns the wait status or -1.
int WaitWithTimeout(pid_t pid, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return -1;
}

int DecodeExit(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

pid_t Spawn(const std::vector<std::string>& argv, const std::string& out_path,
            const std::string& err_path) {
  pid_t pid = fork();
  if (pid != 0) return pid;
  // A test binary that crashes must not leave a daemon behind.
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  int devnull = open("/dev/null", O_RDONLY);
  dup2(devnull, STDIN_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Unblock signals the test runner may have blocked.
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  execv(args[0], args.data());
  _exit(127);
}

}  // namespace

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = absl::StrCat(base && *base ? base : "/tmp", "/placement-test-XXXXXX");
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  char* dir = mkdtemp(buf.data());
  path_ = dir ? dir : "/tmp";
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string PlacementdBinary() {
  const char* bin = std::getenv("PLACEMENTD_BIN");
  return bin ? bin : "placementd";
}

std::string TestBackend() {
  const char* backend = std::getenv("PLACEMENT_TEST_BACKEND");
  return backend && *backend ? backend : "cpu";
}

std::string TestPlatform() { return TestBackend() == "cuda" ? "gpu" : "cpu"; }

std::string TestDataDir(const char* built_in) {
  const char* dir = std::getenv("PLACEMENT_TEST_DATA_DIR");
  return dir && *dir ? dir : built_in;
}

std::string PlacectlBinary() {
  const char* bin = std::getenv("PLACECTL_BIN");
  return bin ? bin : "placectl";
}

std::string WaitForFileLine(const std::string& path, absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string content = ReadFile(path);
    size_t nl = content.find('\n');
    if (nl != std::string::npos) return content.substr(0, nl);
    absl::SleepFor(absl::Milliseconds(20));
  }
  return "";
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Start(const DaemonOptions& options) {
  auto d = Launch(options);
  if (!d.ok()) return d.status();
  if (absl::Status ready = (*d)->WaitReady(options.start_timeout); !ready.ok()) return ready;
  return d;
}

absl::StatusOr<std::unique_ptr<DaemonProcess>> DaemonProcess::Launch(const DaemonOptions& options) {
  std::unique_ptr<DaemonProcess> d(new DaemonProcess());
  d->dir_ = std::make_unique<TempDir>();
  const std::string ready = d->dir_->path() + "/ready";
  d->ready_path_ = ready;
  d->stderr_path_ = d->dir_->path() + "/stderr";
  std::vector<std::string> argv = options.command_prefix;
  for (const std::string& a :
       {PlacementdBinary(), "--ready_file=" + ready, std::string("--drain_timeout=10s")}) {
    argv.push_back(a);
  }
  argv.push_back(!options.listen.empty() ? "--listen=" + options.listen
                 : options.unix_socket   ? "--listen=unix:" + d->dir_->path() + "/placementd.sock"
                                         : "--listen=127.0.0.1:0");
  bool has_backend = false;
  for (const auto& f : options.extra_flags) has_backend |= f.rfind("--backend", 0) == 0;
  if (has_backend || TestBackend() != "cuda") {
    if (!has_backend) argv.push_back(absl::StrCat("--backend=", TestBackend()));
    for (const auto& f : options.extra_flags) argv.push_back(f);
  } else {
    // The CPU suite's device layout on a GPU: each CPU virtual device
    // becomes a logical device of GPU 0, with the same budget.
    argv.push_back("--backend=cuda");
    bool has_count = false;
    for (const auto& f : options.extra_flags) {
      if (absl::StartsWith(f, "--cpu_devices=")) {
        has_count = true;
        argv.push_back(absl::StrCat("--cuda_logical_devices=", f.substr(14)));
      } else if (absl::StartsWith(f, "--cpu_device_memory=")) {
        argv.push_back(absl::StrCat("--cuda_device_memory=", f.substr(20)));
      } else {
        argv.push_back(f);
      }
    }
    if (!has_count) argv.push_back("--cuda_logical_devices=8");
  }
  if (argv[0] != PlacementdBinary()) {
    // execv needs a path: resolve the prefix's program ("ip").
    for (const char* dir : {"/usr/sbin/", "/sbin/", "/usr/bin/", "/bin/"}) {
      if (access((dir + argv[0]).c_str(), X_OK) == 0) {
        argv[0] = dir + argv[0];
        break;
      }
    }
  }
  d->pid_ = Spawn(argv, d->dir_->path() + "/stdout", d->stderr_path_);
  if (d->pid_ < 0) return absl::InternalError("fork failed");
  return d;
}

absl::Status DaemonProcess::WaitReady(absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    std::string line = WaitForFileLine(ready_path_, absl::Milliseconds(50));
    if (!line.empty()) {
      address_ = line;
      return absl::OkStatus();
    }
    int status = 0;
    if (pid_ > 0 && waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("placementd exited with ", DecodeExit(status), " before ready: ", Stderr()));
    }
  }
  return absl::DeadlineExceededError(absl::StrCat("placementd not ready: ", Stderr()));
}

int DaemonProcess::WaitExit(absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  int status = WaitWithTimeout(pid_, timeout);
  if (status == -1) return -1;
  pid_ = -1;
  return DecodeExit(status);
}

std::string DaemonProcess::ReadyValue(const std::string& key) const {
  std::istringstream lines(ReadFile(ready_path_));
  std::string line;
  while (std::getline(lines, line)) {
    if (absl::StartsWith(line, key + "=")) return line.substr(key.size() + 1);
  }
  return "";
}

DaemonProcess::~DaemonProcess() {
  if (pid_ > 0) Stop(SIGKILL, absl::Seconds(10));
}

absl::StatusOr<std::unique_ptr<client::Client>> DaemonProcess::Connect() const {
  return client::Client::Connect(address_);
}

int DaemonProcess::Stop(int signal, absl::Duration timeout) {
  if (pid_ <= 0) return -1;
  kill(pid_, signal);
  int status = WaitWithTimeout(pid_, timeout);
  if (status == -1) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    return -1;
  }
  pid_ = -1;
  return DecodeExit(status);
}

std::string DaemonProcess::Stderr() const { return ReadFile(stderr_path_); }

CommandResult RunCommand(const std::vector<std::string>& argv, absl::Duration timeout) {
  TempDir dir;
  CommandResult result;
  pid_t pid = Spawn(argv, dir.path() + "/out", dir.path() + "/err");
  int status = WaitWithTimeout(pid, timeout);
  if (status == -1) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  } else {
    result.exit_code = DecodeExit(status);
  }
  result.out = ReadFile(dir.path() + "/out");
  result.err = ReadFile(dir.path() + "/err");
  return result;
}

}  // namespace placement::testing
