#include "bench/echo_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "bench/bench_util.h"

namespace placement::bench {
namespace {

// The child: serves until `stop_fd` reaches EOF, after writing its address
// and a newline to `ready_fd`.
[[noreturn]] void ServeEcho(const std::string& address, int ready_fd, int stop_fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  EchoServiceImpl service;
  std::string bound;
  std::unique_ptr<grpc::Server> server = StartEchoServer(&service, address, &bound);
  const std::string line = server != nullptr ? bound + "\n" : std::string("\n");
  (void)!write(ready_fd, line.data(), line.size());
  close(ready_fd);
  char byte;
  while (read(stop_fd, &byte, 1) > 0) {
  }
  if (server != nullptr) server->Shutdown();
  _exit(0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<EchoProcess>> EchoProcess::Start(const std::string& address) {
  int ready[2];
  int stop[2];
  // Close-on-exec: the daemons this process starts later must not hold the
  // pipes open.
  if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(stop, O_CLOEXEC) != 0)
    return absl::InternalError("pipe failed");
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    close(ready[0]);
    close(stop[1]);
    ServeEcho(address, ready[1], stop[0]);
  }
  close(ready[1]);
  close(stop[0]);
  std::unique_ptr<EchoProcess> p(new EchoProcess());
  p->pid_ = pid;
  p->stop_fd_ = stop[1];
  std::string line;
  char c;
  while (read(ready[0], &c, 1) == 1 && c != '\n') line.push_back(c);
  close(ready[0]);
  if (line.empty()) {
    return absl::UnavailableError("the echo server process could not listen on " + address);
  }
  p->address_ = line;
  return p;
}

EchoProcess::~EchoProcess() {
  if (stop_fd_ >= 0) close(stop_fd_);
  if (pid_ > 0) waitpid(pid_, nullptr, 0);
}

}  // namespace placement::bench
