// DaemonProcess: a real placementd child process for integration tests,
// listening on 127.0.0.1 port 0 (or a unix socket in a temp dir), found
// through --ready_file. The binary comes from $PLACEMENTD_BIN (set by ctest).
//
// Not thread-safe; one owner per process.
#ifndef PLACEMENT_TESTS_TESTING_DAEMON_PROCESS_H_
#define PLACEMENT_TESTS_TESTING_DAEMON_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "placement/client/client.h"

namespace placement::testing {

// A fresh directory under $TMPDIR, removed with its contents on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

struct DaemonOptions {
  std::vector<std::string> extra_flags;  // e.g. "--cpu_devices=4"
  bool unix_socket = false;
  absl::Duration start_timeout = absl::Seconds(30);
  // --listen when set (e.g. an address inside a network namespace).
  std::string listen;
  // Runs the daemon under this command (e.g. {"ip", "netns", "exec", "ns"}).
  std::vector<std::string> command_prefix;
};

class DaemonProcess {
 public:
  // Starts the daemon and waits for its ready file. The status carries the
  // daemon's stderr when it exits before becoming ready.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Start(const DaemonOptions& options = {});
  // Starts the daemon without waiting (daemons of a cluster are ready only
  // once all have joined); WaitReady waits for the ready file.
  static absl::StatusOr<std::unique_ptr<DaemonProcess>> Launch(const DaemonOptions& options);
  absl::Status WaitReady(absl::Duration timeout);
  // Waits (bounded) for the daemon to exit by itself; its exit code, or -1.
  int WaitExit(absl::Duration timeout);
  ~DaemonProcess();

  const std::string& address() const { return address_; }
  // A "key=value" line of the ready file ("peer" in a cluster), or "".
  std::string ReadyValue(const std::string& key) const;
  pid_t pid() const { return pid_; }
  // A connected client with default options.
  absl::StatusOr<std::unique_ptr<client::Client>> Connect() const;
  // Sends `signal` and waits (bounded) for exit; returns the exit code, or
  // 128+signal when killed by a signal, or -1 on timeout (then SIGKILLed).
  int Stop(int signal, absl::Duration timeout = absl::Seconds(30));
  // Everything the daemon wrote to stderr so far.
  std::string Stderr() const;

 private:
  DaemonProcess() = default;
  std::unique_ptr<TempDir> dir_;
  pid_t pid_ = -1;
  std::string address_;
  std::string stderr_path_;
  std::string ready_path_;
};

// Runs `argv` to completion (bounded by `timeout`), capturing stdout and
// stderr. Returns the exit code.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
CommandResult RunCommand(const std::vector<std::string>& argv,
                         absl::Duration timeout = absl::Seconds(60));

// $PLACEMENTD_BIN / $PLACECTL_BIN.
std::string PlacementdBinary();
std::string PlacectlBinary();
// The --backend a started daemon gets when its flags name none:
// $PLACEMENT_TEST_BACKEND, else "cpu". With "cuda", a daemon started without
// --backend runs the CPU suite's layout on GPU 0: --cpu_devices=N becomes
// --cuda_logical_devices=N (default 8), --cpu_device_memory the same budget.
std::string TestBackend();
// The platform name (DeviceInfo.platform) of the devices a daemon started
// with TestBackend() has: "cpu", or "gpu" for cuda.
std::string TestPlatform();

// The tests/data directory: $PLACEMENT_TEST_DATA_DIR (set where the tests run
// away from the source tree they were built from, as scripts/gpu_check.sh
// does), else `built_in` (the build's PLACEMENT_TEST_DATA_DIR).
std::string TestDataDir(const char* built_in);

// Waits until `path` exists and is non-empty, up to `timeout`; returns its
// first line without the newline, or empty on timeout.
std::string WaitForFileLine(const std::string& path, absl::Duration timeout);

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_TESTING_DAEMON_PROCESS_H_
