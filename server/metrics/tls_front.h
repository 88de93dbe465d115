// MetricsTlsFront: a small HTTPS/1.1 server (OpenSSL) for the metrics port
// when it is not loopback and the daemon has a TLS certificate.
//
// Why not the exposer's own TLS: Debian's civetweb loads OpenSSL at run time
// by name and, against OpenSSL 3, crashes on the first HTTPS request (a null
// entry in its function table; docs/security.md). This front terminates TLS
// itself and asks `handler` for each request's answer.
//
// Contract: an accept thread hands each connection to a thread of its own,
// at most kMaxConnections at once (more are closed at once, so a few stalled
// clients cannot hold the port); each connection carries one request
// ("Connection: close"); a read or write that waits 5 s, a request not
// complete 5 s after the handshake, or more than 8 KiB of headers drop the
// connection. Only GET and HEAD are answered (others 405). No client
// certificate is asked for. The certificate and key are read at start and
// again by the first connection after either file changes (a change that
// does not load is logged; the previous certificate stays).
//
// Thread-safe; Stop() is idempotent (the destructor calls it).
#ifndef PLACEMENT_SERVER_METRICS_TLS_FRONT_H_
#define PLACEMENT_SERVER_METRICS_TLS_FRONT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

struct HttpAnswer {
  int code = 200;  // 200, 404, 503, ...
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class MetricsTlsFront {
 public:
  static constexpr int kMaxConnections = 8;

  // Called on the accept thread with the request path ("/metrics").
  using Handler = std::function<HttpAnswer(const std::string& path)>;

  // Binds numeric IPv4 `host`:`port` (0 picks one). INVALID_ARGUMENT when the
  // certificate or key cannot be loaded (naming the file), UNAVAILABLE when
  // the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsTlsFront>> Start(const std::string& host, int port,
                                                                const std::string& cert_file,
                                                                const std::string& key_file,
                                                                Handler handler);
  ~MetricsTlsFront();

  int port() const { return port_; }
  // Stops accepting, aborts the connections in progress (shutting their
  // sockets down) and waits for their threads.
  void Stop();

 private:
  struct Tls;
  MetricsTlsFront(int listen_fd, int port, std::unique_ptr<Tls> tls, Handler handler);
  void AcceptLoop();
  void Serve(int fd);

  const int listen_fd_;
  const int port_;
  std::unique_ptr<Tls> tls_;
  const Handler handler_;
  std::atomic<bool> stopping_{false};
  absl::Mutex mu_;
  std::thread thread_ ABSL_GUARDED_BY(mu_);
  // The sockets being served. Shared with the connection threads so that
  // the mutex outlives the last one's unlock.
  struct Connections {
    absl::Mutex mu;
    absl::flat_hash_set<int> fds ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<Connections> connections_ = std::make_shared<Connections>();
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_METRICS_TLS_FRONT_H_
