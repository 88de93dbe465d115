// EchoProcess: the bench EchoService (bench_util.h: bare echo, byte sink,
// byte source) served by a child process of its own, so a baseline RPC
// crosses a process boundary as calls between daemons do. The child serves
// until this object is destroyed (or this process dies).
//
// Start() forks without exec: call it before this process creates any gRPC
// object (gRPC's threads do not survive a fork).
//
// Not thread-safe.
#ifndef PLACEMENT_BENCH_ECHO_PROCESS_H_
#define PLACEMENT_BENCH_ECHO_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placement::bench {

class EchoProcess {
 public:
  // `address`: "127.0.0.1:0" (a free port) or "unix:/path".
  static absl::StatusOr<std::unique_ptr<EchoProcess>> Start(const std::string& address);
  // Stops the child and waits for it.
  ~EchoProcess();
  EchoProcess(const EchoProcess&) = delete;
  EchoProcess& operator=(const EchoProcess&) = delete;

  // The dialable address of the child's server.
  const std::string& address() const { return address_; }
  pid_t pid() const { return pid_; }

 private:
  EchoProcess() = default;
  pid_t pid_ = -1;
  int stop_fd_ = -1;  // closing it tells the child to exit
  std::string address_;
};

}  // namespace placement::bench

#endif  // PLACEMENT_BENCH_ECHO_PROCESS_H_
