#include "server/metrics/tls_front.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/logging.h"

namespace placement::server {
namespace {

constexpr size_t kMaxRequestHeaderBytes = 8 << 10;
constexpr int kIoTimeoutSeconds = 5;

std::string OpenSslError() {
  unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  ERR_clear_error();
  return text;
}

const char* Reason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 400:
      return "Bad Request";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

// Writes all of `data`; false when the peer went away.
bool WriteAll(SSL* ssl, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    int n = SSL_write(ssl, data.data() + done, static_cast<int>(data.size() - done));
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

// The certificate and key files, and the SSL_CTX made from them; remade on
// a connection that finds either file changed (mtime or size). A change that
// does not load is logged and the previous context kept.
struct MetricsTlsFront::Tls {
  using Ctx = std::shared_ptr<SSL_CTX>;

  static absl::StatusOr<Ctx> Load(const std::string& cert_file, const std::string& key_file) {
    Ctx ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
    if (ctx == nullptr) return absl::InternalError(OpenSslError());
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics TLS: cannot load the certificate --tls_cert=", cert_file, ": ", OpenSslError()));
    }
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(ctx.get()) != 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metrics TLS: cannot load the key --tls_key=", key_file, ": ", OpenSslError()));
    }
    return ctx;
  }
  // mtime (ns) and size of both files; empty when one cannot be stat'ed.
  std::string Stamp() const {
    std::string out;
    for (const std::string* path : {&cert_file, &key_file}) {
      struct stat st {};
      if (stat(path->c_str(), &st) != 0) return "";
      absl::StrAppend(&out, st.st_mtim.tv_sec, ".", st.st_mtim.tv_nsec, ":", st.st_size, ";");
    }
    return out;
  }
  // The context to use now, reloading first when the files changed.
  Ctx Current() {
    absl::MutexLock lock(&mu);
    std::string now = Stamp();
    if (!now.empty() && now != stamp) {
      stamp = now;
      absl::StatusOr<Ctx> loaded = Load(cert_file, key_file);
      if (loaded.ok()) {
        ctx = *std::move(loaded);
        LogInfo("metrics TLS: reloaded the certificate ", cert_file);
      } else {
        LogWarning(loaded.status().message(), "; keeping the previous certificate");
      }
    }
    return ctx;
  }

  std::string cert_file;
  std::string key_file;
  absl::Mutex mu;
  std::string stamp ABSL_GUARDED_BY(mu);
  Ctx ctx ABSL_GUARDED_BY(mu);
};

absl::StatusOr<std::unique_ptr<MetricsTlsFront>> MetricsTlsFront::Start(
    const std::string& host, int port, const std::string& cert_file, const std::string& key_file,
    Handler handler) {
  auto tls = std::make_unique<Tls>();
  tls->cert_file = cert_file;
  tls->key_file = key_file;
  {
    absl::MutexLock lock(&tls->mu);
    tls->stamp = tls->Stamp();
    absl::StatusOr<Tls::Ctx> ctx = Tls::Load(cert_file, key_file);
    if (!ctx.ok()) return ctx.status();
    tls->ctx = *std::move(ctx);
  }

  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("socket: ", std::strerror(errno)));
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("metrics TLS: '", host, "' is not IPv4"));
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0) {
    std::string why = std::strerror(errno);
    close(fd);
    return absl::UnavailableError(
        absl::StrCat("cannot listen for metrics on ", host, ":", port, ": ", why));
  }
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  auto front = std::unique_ptr<MetricsTlsFront>(
      new MetricsTlsFront(fd, ntohs(addr.sin_port), std::move(tls), std::move(handler)));
  {
    absl::MutexLock lock(&front->mu_);
    front->thread_ = std::thread([raw = front.get()] { raw->AcceptLoop(); });
  }
  return front;
}

MetricsTlsFront::MetricsTlsFront(int listen_fd, int port, std::unique_ptr<Tls> tls, Handler handler)
    : listen_fd_(listen_fd), port_(port), tls_(std::move(tls)), handler_(std::move(handler)) {}

MetricsTlsFront::~MetricsTlsFront() {
  Stop();
  close(listen_fd_);
}

void MetricsTlsFront::Stop() {
  absl::MutexLock lock(&mu_);
  if (!thread_.joinable()) return;
  stopping_ = true;
  shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  thread_.join();
  Connections& c = *connections_;
  absl::MutexLock conn_lock(&c.mu);
  for (int fd : c.fds) shutdown(fd, SHUT_RDWR);  // fails their reads and writes
  c.mu.Await(absl::Condition(
      +[](absl::flat_hash_set<int>* fds) { return fds->empty(); }, &c.fds));
}

void MetricsTlsFront::AcceptLoop() {
  while (!stopping_.load()) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (stopping_.load()) return;
      continue;  // EMFILE and the like: try the next connection
    }
    absl::MutexLock lock(&connections_->mu);
    if (stopping_.load() || static_cast<int>(connections_->fds.size()) >= kMaxConnections) {
      close(fd);
      continue;
    }
    connections_->fds.insert(fd);
    // Stop() waits until `fd` leaves the set, so `this` outlives Serve.
    std::thread([this, fd, connections = connections_] {
      Serve(fd);
      absl::MutexLock lock(&connections->mu);
      connections->fds.erase(fd);
      close(fd);
    }).detach();
  }
}

void MetricsTlsFront::Serve(int fd) {
  timeval timeout{kIoTimeoutSeconds, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  const Tls::Ctx ctx = tls_->Current();
  SSL* ssl = SSL_new(ctx.get());
  if (ssl == nullptr) return;
  SSL_set_fd(ssl, fd);
  if (SSL_accept(ssl) != 1) {  // a plaintext client, a client that distrusts us
    ERR_clear_error();
    SSL_free(ssl);
    return;
  }
  std::string request;
  char buffer[2048];
  const absl::Time deadline = absl::Now() + absl::Seconds(kIoTimeoutSeconds);
  while (request.find("\r\n\r\n") == std::string::npos &&
         request.size() <= kMaxRequestHeaderBytes) {
    // Each read waits at most what is left of the request's 5 s.
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    timeval wait = absl::ToTimeval(left);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
    int n = SSL_read(ssl, buffer, sizeof(buffer));
    if (n <= 0) break;
    request.append(buffer, static_cast<size_t>(n));
  }
  HttpAnswer answer;
  bool head = false;
  if (request.find("\r\n\r\n") == std::string::npos) {
    answer = {400, "text/plain; charset=utf-8", "bad request\n"};
  } else {
    std::vector<std::string> line =
        absl::StrSplit(request.substr(0, request.find("\r\n")), ' ', absl::SkipEmpty());
    if (line.size() != 3 || !absl::StartsWith(line[2], "HTTP/1.")) {
      answer = {400, "text/plain; charset=utf-8", "bad request\n"};
    } else if (line[0] != "GET" && line[0] != "HEAD") {
      answer = {405, "text/plain; charset=utf-8", "only GET and HEAD\n"};
    } else {
      head = line[0] == "HEAD";
      std::string path = line[1].substr(0, line[1].find('?'));
      answer = handler_(path);
    }
  }
  std::string response = absl::StrCat(
      "HTTP/1.1 ", answer.code, " ", Reason(answer.code), "\r\nContent-Type: ", answer.content_type,
      "\r\nContent-Length: ", answer.body.size(), "\r\nConnection: close\r\n\r\n");
  if (!head) response += answer.body;
  if (WriteAll(ssl, response)) SSL_shutdown(ssl);
  ERR_clear_error();
  SSL_free(ssl);
}

}  // namespace placement::server
