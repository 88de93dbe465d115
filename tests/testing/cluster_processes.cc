#include "tests/testing/cluster_processes.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::testing {

int PickFreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

DaemonOptions ClusterProcesses::OptionsFor(int i) const {
  DaemonOptions d;
  d.start_timeout = options_.start_timeout;
  d.extra_flags = {
      absl::StrCat("--cpu_devices=", options_.devices_per_process),
      absl::StrCat("--cpu_device_memory=", options_.device_memory),
      absl::StrCat("--num_processes=", options_.num_processes),
      absl::StrCat("--process_index=", i),
      absl::StrCat("--coordinator=", coordinator_),
      absl::StrCat("--heartbeat_interval=", absl::FormatDuration(options_.heartbeat_interval)),
      absl::StrCat("--heartbeat_misses=", options_.heartbeat_misses),
      "--cluster_init_timeout=60s",
  };
  if (namespaces_ != nullptr) {
    const std::string host = namespaces_->address(i);
    d.listen = absl::StrCat(host, ":50051");
    d.command_prefix = namespaces_->ExecPrefix(i);
    d.extra_flags.push_back(absl::StrCat("--peer_listen=", host, ":7000"));
    d.extra_flags.push_back("--allow_insecure");
  }
  if (!options_.environment.empty()) {
    d.command_prefix.push_back("/usr/bin/env");
    for (const std::string& v : options_.environment) d.command_prefix.push_back(v);
  }
  for (const std::string& f : options_.extra_flags) d.extra_flags.push_back(f);
  if (i < static_cast<int>(options_.per_process.size())) {
    for (const std::string& f : options_.per_process[i]) d.extra_flags.push_back(f);
  }
  return d;
}

absl::StatusOr<std::unique_ptr<ClusterProcesses>> ClusterProcesses::Start(
    const ClusterOptions& options) {
  std::unique_ptr<ClusterProcesses> c(new ClusterProcesses());
  c->options_ = options;
  if (options.namespaces) {
    auto ns = NetworkNamespaces::Create(options.num_processes);
    if (!ns.ok()) return ns.status();
    c->namespaces_ = *std::move(ns);
    c->coordinator_ = absl::StrCat(c->namespaces_->address(0), ":7000");
    RETURN_IF_ERROR(c->LaunchAll());
    return c;
  }
  // A picked port is free only until someone else binds it: a test running
  // beside this one can take it before process 0 does ("Address already in
  // use"). Then the cluster starts again on another port, a few times.
  absl::Status started;
  for (int attempt = 0; attempt < 4; ++attempt) {
    c->coordinator_ = absl::StrCat("127.0.0.1:", PickFreePort());
    started = c->LaunchAll();
    if (started.ok()) return c;
    const bool taken = !c->daemons_.empty() &&
                       absl::StrContains(c->daemons_[0]->Stderr(), "Address already in use");
    c->daemons_.clear();
    if (!taken) break;
  }
  return started;
}

absl::Status ClusterProcesses::LaunchAll() {
  for (int i = 0; i < options_.num_processes; ++i) {
    auto d = DaemonProcess::Launch(OptionsFor(i));
    if (!d.ok()) return d.status();
    daemons_.push_back(*std::move(d));
  }
  for (int i = 0; i < options_.num_processes; ++i) {
    if (absl::Status ready = daemons_[i]->WaitReady(options_.start_timeout); !ready.ok()) {
      return absl::Status(ready.code(), absl::StrCat("daemon ", i, ": ", ready.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<client::Client>> ClusterProcesses::Connect(int i) const {
  return daemons_[i]->Connect();
}

absl::StatusOr<std::unique_ptr<client::Client>> ClusterProcesses::Connect(
    int i, const client::ClientOptions& options) const {
  return client::Client::Connect(daemons_[i]->address(), options);
}

void ClusterProcesses::Kill(int i) { daemons_[i]->Stop(SIGKILL, absl::Seconds(10)); }

absl::Status ClusterProcesses::Restart(int i) {
  auto d = DaemonProcess::Launch(OptionsFor(i));
  if (!d.ok()) return d.status();
  daemons_[i] = *std::move(d);
  return daemons_[i]->WaitReady(options_.start_timeout);
}

}  // namespace placement::testing
