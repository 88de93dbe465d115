#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/listen_address.h"

namespace placement::server {
namespace {

void WriteAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, RenderFn render, HealthyFn healthy) {
  auto parsed = ParseListenAddress(address);
  if (!parsed.ok() || parsed->is_unix) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen='", address, "' is invalid: expected host:port"));
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* result = nullptr;
  std::string port_str = std::to_string(parsed->port);
  if (int rc = getaddrinfo(parsed->host.c_str(), port_str.c_str(), &hints, &result); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen='", address, "': ", gai_strerror(rc)));
  }
  int fd = -1;
  std::string last_error;
  for (addrinfo* ai = result; ai != nullptr; ai = ai->ai_next) {
    fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 64) == 0) break;
    last_error = std::strerror(errno);
    close(fd);
    fd = -1;
  }
  freeaddrinfo(result);
  if (fd < 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", address, ": ", last_error));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  int port = bound.ss_family == AF_INET6
                 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                 : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(fd, port, std::move(render), std::move(healthy)));
}

MetricsHttpServer::MetricsHttpServer(int fd, int port, RenderFn render, HealthyFn healthy)
    : listen_fd_(fd), port_(port), render_(std::move(render)), healthy_(std::move(healthy)) {
  thread_ = std::thread([this] { Serve(); });
}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (stopping_.exchange(true)) return;
  shutdown(listen_fd_, SHUT_RDWR);
  if (thread_.joinable()) thread_.join();
  close(listen_fd_);
}

void MetricsHttpServer::Serve() {
  while (!stopping_.load()) {
    pollfd p{listen_fd_, POLLIN, 0};
    int rc = poll(&p, 1, 200);
    if (rc <= 0) continue;
    int conn = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (conn < 0) continue;
    HandleConnection(conn);
    close(conn);
  }
}

void MetricsHttpServer::HandleConnection(int fd) {
  // Read until the end of the headers, at most 8 KiB, at most 2 s.
  std::string request;
  char buf[2048];
  while (request.size() < 8192 && !absl::StrContains(request, "\r\n\r\n") &&
         !absl::StrContains(request, "\n\n")) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 2000) <= 0) return;
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    request.append(buf, static_cast<size_t>(n));
  }
  std::string status = "200 OK";
  std::string body;
  std::string type = "text/plain; version=0.0.4; charset=utf-8";
  if (absl::StartsWith(request, "GET /metrics")) {
    body = render_();
  } else if (absl::StartsWith(request, "GET /healthz")) {
    bool ok = healthy_();
    status = ok ? "200 OK" : "503 Service Unavailable";
    body = ok ? "ok\n" : "draining\n";
  } else {
    status = "404 Not Found";
    body = "not found; try /metrics or /healthz\n";
  }
  WriteAll(fd, absl::StrCat("HTTP/1.0 ", status, "\r\nContent-Type: ", type,
                            "\r\nContent-Length: ", body.size(), "\r\nConnection: close\r\n\r\n",
                            body));
}

}  // namespace placement::server
