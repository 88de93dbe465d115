#include "server/metrics/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <exception>
#include <map>
#include <thread>
#include <vector>

#include "CivetServer.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "civetweb.h"
#include "prometheus/exposer.h"
#include "prometheus/text_serializer.h"
#include "server/listen_address.h"

namespace placement::server {
namespace {

// civetweb's begin_request callback gets no pointer the exposer lets us set,
// so /healthz finds the health function of its server by listening port
// (ports are unique among a process's listening sockets on one address).
class HealthRoutes {
 public:
  static HealthRoutes& Get() {
    static HealthRoutes* routes = new HealthRoutes();
    return *routes;
  }
  void Set(int port, MetricsHttpServer::HealthyFn healthy) {
    absl::MutexLock lock(&mu_);
    routes_[port] = std::make_shared<MetricsHttpServer::HealthyFn>(std::move(healthy));
  }
  void Erase(int port) {
    absl::MutexLock lock(&mu_);
    routes_.erase(port);
  }
  // False for a port not (or no longer) registered: a server that is
  // starting or stopping is not healthy.
  bool Healthy(int port) {
    std::shared_ptr<MetricsHttpServer::HealthyFn> healthy;
    {
      absl::MutexLock lock(&mu_);
      auto it = routes_.find(port);
      if (it == routes_.end()) return false;
      healthy = it->second;
    }
    return (*healthy)();
  }

 private:
  absl::Mutex mu_;
  std::map<int, std::shared_ptr<MetricsHttpServer::HealthyFn>> routes_ ABSL_GUARDED_BY(mu_);
};

// Answers GET /healthz itself (returns the status code); 0 lets the exposer
// handle every other request.
int BeginRequest(mg_connection* conn) {
  const mg_request_info* info = mg_get_request_info(conn);
  if (info == nullptr || info->local_uri == nullptr ||
      std::strcmp(info->local_uri, "/healthz") != 0) {
    return 0;
  }
  const bool ok = HealthRoutes::Get().Healthy(info->server_port);
  const char* body = ok ? "ok\n" : "draining\n";
  mg_printf(conn,
            "HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %zu\r\n"
            "Connection: close\r\n\r\n%s",
            ok ? "200 OK" : "503 Service Unavailable", std::strlen(body), body);
  return ok ? 200 : 503;
}

const CivetCallbacks& Callbacks() {
  static const CivetCallbacks* callbacks = [] {
    auto* c = new CivetCallbacks();
    c->begin_request = &BeginRequest;
    return c;
  }();
  return *callbacks;
}

absl::StatusOr<std::string> ResolveIpv4(const std::string& flag_value, const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result); rc != 0) {
    return absl::InvalidArgumentError(absl::StrCat("--metrics_listen='", flag_value, "': host '",
                                                   host,
                                                   "' has no IPv4 address: ", gai_strerror(rc)));
  }
  char numeric[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(result->ai_addr)->sin_addr, numeric,
            sizeof(numeric));
  freeaddrinfo(result);
  return std::string(numeric);
}

// Connects to host:port (0.0.0.0 as loopback) and closes at once.
void ConnectAndClose(const std::string& host, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (host == "0.0.0.0" || inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  }
  connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

// The HTTPS routes: what the exposer and BeginRequest answer over HTTP.
HttpAnswer Route(const std::string& path, const Metrics& metrics,
                 const MetricsHttpServer::HealthyFn& healthy) {
  if (path == "/healthz") {
    const bool ok = healthy();
    return {ok ? 200 : 503, "text/plain; charset=utf-8", ok ? "ok\n" : "draining\n"};
  }
  if (path != "/metrics") return {404, "text/plain; charset=utf-8", "not found\n"};
  std::vector<prometheus::MetricFamily> families;
  for (const auto& weak : metrics.Collectables()) {
    if (auto collectable = weak.lock()) {
      auto collected = collectable->Collect();
      families.insert(families.end(), std::make_move_iterator(collected.begin()),
                      std::make_move_iterator(collected.end()));
    }
  }
  return {200, "text/plain; version=0.0.4; charset=utf-8",
          prometheus::TextSerializer().Serialize(families)};
}

}  // namespace

absl::StatusOr<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::Start(
    const std::string& address, const Metrics& metrics, HealthyFn healthy,
    const std::optional<Tls>& tls) {
  auto parsed = ParseListenAddress(address);
  if (!parsed.ok() || parsed->is_unix) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen='", address, "' is invalid: expected host:port"));
  }
  if (parsed->host.find(':') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics_listen='", address,
                     "': IPv6 is not supported by the metrics server (civetweb as packaged "
                     "by Debian has no IPv6); use an IPv4 address such as 0.0.0.0:9464"));
  }
  auto host = ResolveIpv4(address, parsed->host);
  if (!host.ok()) return host.status();
  if (tls.has_value()) {
    auto front =
        MetricsTlsFront::Start(*host, parsed->port, tls->cert_file, tls->key_file,
                               [&metrics, healthy = std::move(healthy)](const std::string& path) {
                                 return Route(path, metrics, healthy);
                               });
    if (!front.ok()) return front.status();
    const int port = (*front)->port();
    return std::unique_ptr<MetricsHttpServer>(
        new MetricsHttpServer(nullptr, *std::move(front), *host, port));
  }
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(
        // Two workers; a client that sends no full request within 5 s is dropped.
        std::vector<std::string>{"listening_ports", absl::StrCat(*host, ":", parsed->port),
                                 "num_threads", "2", "request_timeout_ms", "5000"},
        &Callbacks());
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("cannot listen for metrics on ", address,
                                               ": the address is in use or not available on "
                                               "this host (",
                                               e.what(), ")"));
  }
  for (const auto& collectable : metrics.Collectables()) exposer->RegisterCollectable(collectable);
  std::vector<int> ports = exposer->GetListeningPorts();
  const int port = ports.empty() ? parsed->port : ports[0];
  HealthRoutes::Get().Set(port, std::move(healthy));
  return std::unique_ptr<MetricsHttpServer>(
      new MetricsHttpServer(std::move(exposer), nullptr, *host, port));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<prometheus::Exposer> exposer,
                                     std::unique_ptr<MetricsTlsFront> tls_front, std::string host,
                                     int port)
    : host_(std::move(host)),
      port_(port),
      address_(absl::StrCat(host_, ":", port)),
      exposer_(std::move(exposer)),
      tls_front_(std::move(tls_front)) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

void MetricsHttpServer::Stop() {
  if (tls_front_ != nullptr) tls_front_->Stop();
  absl::MutexLock lock(&mu_);
  if (exposer_ == nullptr) return;
  // civetweb's accept loop sees its stop flag only when its poll returns,
  // which without traffic takes its 2 s quantum. Connections made while the
  // exposer stops wake it at once.
  std::atomic<bool> stopped{false};
  std::thread waker([this, &stopped] {
    while (!stopped.load()) {
      ConnectAndClose(host_, port_);
      absl::SleepFor(absl::Milliseconds(5));
    }
  });
  exposer_.reset();  // joins civetweb's threads: no request runs after this
  stopped = true;
  waker.join();
  HealthRoutes::Get().Erase(port_);
}

}  // namespace placement::server
