// A TCP listener on 127.0.0.1 port 0 for connect tests: it closes the first
// `drop` connections it accepts and forwards later ones, byte for byte, to
// `upstream` ("host:port"; empty: it closes every connection). Stops (and
// joins its threads) on destruction; connections still forwarding end then.
#ifndef PLACEMENT_TESTS_CLIENT_DROPPING_LISTENER_H_
#define PLACEMENT_TESTS_CLIENT_DROPPING_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace placement::testing {

class DroppingListener {
 public:
  DroppingListener(std::string upstream, int drop) : upstream_(std::move(upstream)), drop_(drop) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    listen(fd_, 16);
    socklen_t length = sizeof(address);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length);
    target_ = "127.0.0.1:" + std::to_string(ntohs(address.sin_port));
    acceptor_ = std::thread([this] { Serve(); });
  }

  ~DroppingListener() {
    shutdown(fd_, SHUT_RDWR);  // wakes accept()
    acceptor_.join();
    close(fd_);
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : open_) shutdown(fd, SHUT_RDWR);  // ends the pumps
    for (std::thread& pump : pumps_) pump.join();
    for (int fd : open_) close(fd);
  }

  const std::string& target() const { return target_; }
  int accepted() const { return accepted_.load(); }

 private:
  void Serve() {
    while (true) {
      const int conn = accept(fd_, nullptr, nullptr);
      if (conn < 0) return;
      if (upstream_.empty() || ++accepted_ <= drop_) {
        if (upstream_.empty()) ++accepted_;
        close(conn);
        continue;
      }
      const int up = ConnectUpstream();
      std::lock_guard<std::mutex> lock(mu_);
      open_.insert(open_.end(), {conn, up});
      pumps_.emplace_back([conn, up] { Pump(conn, up); });
      pumps_.emplace_back([conn, up] { Pump(up, conn); });
    }
  }

  int ConnectUpstream() const {
    const size_t colon = upstream_.rfind(':');
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(std::stoi(upstream_.substr(colon + 1))));
    inet_pton(AF_INET, upstream_.substr(0, colon).c_str(), &address.sin_addr);
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
    return fd;
  }

  static void Pump(int from, int to) {
    char buffer[1 << 16];
    while (true) {
      const ssize_t n = read(from, buffer, sizeof(buffer));
      if (n <= 0) break;
      if (send(to, buffer, n, MSG_NOSIGNAL) != n) break;
    }
    shutdown(from, SHUT_RDWR);  // the other direction's read returns too
    shutdown(to, SHUT_RDWR);
  }

  const std::string upstream_;
  const int drop_;
  int fd_ = -1;
  std::string target_;
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> open_;
  std::vector<std::thread> pumps_;
};

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_CLIENT_DROPPING_LISTENER_H_
