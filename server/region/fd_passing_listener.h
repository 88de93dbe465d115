// FdPassingListener: the side channel through which same-host clients hand
// the daemon a file descriptor of their shared memory (SCM_RIGHTS over a
// unix stream socket), since gRPC cannot carry descriptors.
//
// Protocol, one descriptor per connection: the client connects, sends at
// least one byte with exactly one fd attached, and reads one line back:
// 32 hex digits (the handle token) or "ERR <reason>". The token is then
// claimed by RegisterRegion (TakeFd), which runs under the caller's gRPC
// credentials. Tokens are random (128 bits), single-use and expire after
// `token_ttl`; at most `max_pending` wait unclaimed (the oldest is dropped).
// The socket is a filesystem path or, for "@name", a Linux abstract socket
// (no file; scoped to the network namespace).
//
// A connection that sends nothing within one second is dropped, so a stalled
// peer cannot hold the accept loop.
//
// Thread-safe. One background thread serves the socket until destruction,
// which closes every unclaimed fd and unlinks a path socket.
#ifndef PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_
#define PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

struct FdPassingOptions {
  absl::Duration token_ttl = absl::Seconds(60);
  int64_t max_pending = 256;
};

class FdPassingListener {
 public:
  // Listens on `address` ("/run/placementd/regions.sock" or "@name").
  // INVALID_ARGUMENT for an empty or too long address; UNAVAILABLE when it
  // cannot be bound (a live listener already owns it).
  static absl::StatusOr<std::unique_ptr<FdPassingListener>> Start(const std::string& address,
                                                                  FdPassingOptions options = {});
  ~FdPassingListener();
  FdPassingListener(const FdPassingListener&) = delete;
  FdPassingListener& operator=(const FdPassingListener&) = delete;

  // What clients connect to, as given to Start.
  const std::string& address() const { return address_; }

  // Takes the fd passed with `token`; the caller owns (closes) it.
  // NOT_FOUND for an unknown, expired or already claimed token.
  absl::StatusOr<int> TakeFd(const std::string& token);

  // Unclaimed fds held now.
  int64_t pending() const;

 private:
  FdPassingListener(std::string address, int listen_fd, int wake_fd, FdPassingOptions options);
  void Serve();
  void HandleConnection(int conn);
  // Drops expired tokens (closing their fds).
  void SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Pending {
    int fd = -1;
    absl::Time expire;
  };

  const std::string address_;
  const int listen_fd_;
  const int wake_fd_;  // eventfd: written to stop Serve
  const FdPassingOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_
