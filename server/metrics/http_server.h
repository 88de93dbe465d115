// MetricsHttpServer: the Prometheus scrape endpoint: GET /metrics returns the
// text exposition of a Metrics; GET /healthz returns 200 "ok" while
// `healthy()` holds, else 503 "draining"; anything else 404.
// Plain HTTP is served by prometheus-cpp's pull exposer (civetweb, two
// threads); HTTPS (given a certificate) by MetricsTlsFront (tls_front.h),
// with the same routes and exposition text.
//
// Thread-safe; Stop() is idempotent (the destructor calls it).
#ifndef PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_
#define PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/metrics/metrics.h"
#include "server/metrics/tls_front.h"

namespace prometheus {
class Exposer;
}  // namespace prometheus

namespace placement::server {

class MetricsHttpServer {
 public:
  using HealthyFn = std::function<bool()>;

  // Binds `host:port` (port 0 picks one). The host is an IPv4 address or a
  // name that resolves to one (Debian's civetweb is built without IPv6).
  // INVALID_ARGUMENT for a malformed, unix or IPv6 address; UNAVAILABLE when
  // it cannot bind. REQUIRES: `metrics` outlives the server; `healthy` is
  // thread-safe.
  // With `tls` (cert_file and key_file set) the port serves HTTPS only;
  // INVALID_ARGUMENT when the certificate or key cannot be loaded.
  struct Tls {
    std::string cert_file;
    std::string key_file;
  };
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(
      const std::string& address, const Metrics& metrics, HealthyFn healthy,
      const std::optional<Tls>& tls = std::nullopt);
  ~MetricsHttpServer();

  int port() const { return port_; }
  // "host:port" with the port actually bound, e.g. "127.0.0.1:41234".
  const std::string& address() const { return address_; }
  // "https" with TLS, else "http".
  const char* scheme() const { return tls_front_ != nullptr ? "https" : "http"; }
  // Stops serving and joins the server threads.
  void Stop();

 private:
  MetricsHttpServer(std::unique_ptr<prometheus::Exposer> exposer,
                    std::unique_ptr<MetricsTlsFront> tls_front, std::string host, int port);

  const std::string host_;  // numeric IPv4
  const int port_;
  const std::string address_;
  absl::Mutex mu_;
  std::unique_ptr<prometheus::Exposer> exposer_ ABSL_GUARDED_BY(mu_);  // plain HTTP
  const std::unique_ptr<MetricsTlsFront> tls_front_;                   // HTTPS
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_
