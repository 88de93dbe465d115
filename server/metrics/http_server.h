// A deliberately tiny HTTP/1.0 server for Prometheus scrapes: GET /metrics
// returns the text exposition, GET /healthz returns "ok" (or 503 while
// draining). One accept thread, one request per connection, bounded reads.
//
// Thread-safe; Stop() is idempotent and joins the thread.
#ifndef PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_
#define PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace placement::server {

class MetricsHttpServer {
 public:
  using RenderFn = std::function<std::string()>;
  using HealthyFn = std::function<bool()>;

  // Binds `host:port` (port 0 picks one). INVALID_ARGUMENT for a malformed
  // address, UNAVAILABLE when it cannot bind.
  static absl::StatusOr<std::unique_ptr<MetricsHttpServer>> Start(const std::string& address,
                                                                  RenderFn render,
                                                                  HealthyFn healthy);
  ~MetricsHttpServer();
  int port() const { return port_; }
  void Stop();

 private:
  MetricsHttpServer(int fd, int port, RenderFn render, HealthyFn healthy);
  void Serve();
  void HandleConnection(int fd);

  int listen_fd_;
  int port_;
  RenderFn render_;
  HealthyFn healthy_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_HTTP_SERVER_H_
