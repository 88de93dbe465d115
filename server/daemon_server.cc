#include "server/daemon_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "server/service/malformed_request_interceptor.h"
#include "server/service/rpc_metrics_interceptor.h"

namespace placement::server {

absl::Status CheckUnixSocketFree(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("unix socket path '", path, "' is longer than ",
                                                   sizeof(addr.sun_path) - 1, " bytes"));
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::OkStatus();
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path.c_str());
  bool live = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  if (live) {
    return absl::UnavailableError(absl::StrCat("cannot listen on unix:", path,
                                               ": address already in use by a running server"));
  }
  return absl::OkStatus();
}

void ApplyServerDefaults(grpc::ServerBuilder* builder) {
  // Two daemons must never share a port: without this gRPC sets SO_REUSEPORT.
  builder->AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder->AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  builder->AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
}

void SetDaemonInterceptors(grpc::ServerBuilder* builder, Metrics* metrics) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> chain;
  chain.push_back(MakeMalformedRequestInterceptorFactory());
  if (metrics != nullptr) chain.push_back(InstallRpcMetrics(builder, metrics));
  builder->experimental().SetInterceptorCreators(std::move(chain));
}

}  // namespace placement::server
