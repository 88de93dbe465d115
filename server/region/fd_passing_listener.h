// FdPassingListener: the side channel through which same-host clients hand
// the daemon a file descriptor of their shared memory (SCM_RIGHTS over a
// unix stream socket), since gRPC cannot carry descriptors.
//
// Protocol, one request per connection: the client connects, sends the
// byte 'R' with exactly one fd attached, and reads one line back: 32 hex
// digits (the handle token) or "ERR <reason>". The token is claimed by
// RegisterRegion (TakeFd), which runs under the caller's gRPC credentials;
// the fd's depositor (its pid, uid and pidfd, from SO_PEERCRED) goes with it.
//
// The other direction (shard views, docs/api/views.md): the client sends
// "V", a token from ExportShards and "\n", and reads back "OK <n>\n" with n
// fds attached (past kMaxFdsPerMessage, the rest ride on further one-byte
// messages "+"), or "ERR <reason>". The redeemer (the export registry)
// checks the token and learns the reader (SO_PEERCRED). Other request bytes
// are answered "ERR unknown request ...".
//
// Who may connect: for a path socket, its mode and group (listening_unix_
// socket.h); for "@name", every process of the network namespace. Either
// way a connection only yields a token, which is worth nothing without the
// tenant's gRPC credentials, and the bounds below keep one client from
// getting in another's way.
//
// Serving: one thread, epoll over every open connection, so no connection
// can stall another. A connection that sends nothing within
// `connection_timeout` is closed; connections open at once are bounded in
// all, per uid and per process -- a process in a pid namespace the daemon
// cannot see (pid 0) by its uid only (past a bound a new connection is
// answered "ERR ..." and closed). Unclaimed fds are bounded by FdTokenTable.
//
// Thread-safe. The destructor stops the thread, closes every connection and
// unclaimed fd, and unlinks a path socket.
#ifndef PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_
#define PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/region/fd_token_table.h"
#include "server/region/listening_unix_socket.h"
#include "server/region/peer_process.h"

namespace placement::server {

// Fds attached to one message of a view hand-over (the kernel's bound is
// SCM_MAX_FD, 253).
inline constexpr int kMaxFdsPerMessage = 250;

// Hands the fds behind a view token to `reader` (the listener sends and then
// closes them); NOT_FOUND for an unknown token.
using ViewRedeemer = std::function<absl::StatusOr<std::vector<int>>(
    const std::string& token, const std::shared_ptr<PeerProcess>& reader)>;

struct FdPassingOptions {
  FdTokenLimits tokens;
  SocketAccess access;
  int64_t max_connections = 256;
  int64_t max_connections_per_uid = 128;
  int64_t max_connections_per_process = 64;
  absl::Duration connection_timeout = absl::Seconds(5);
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

  // Takes the fd passed with `token` and who passed it; the caller owns
  // (closes) the fd. NOT_FOUND for an unknown, expired or claimed token.
  absl::StatusOr<ClaimedFd> TakeFd(const std::string& token);
  // Who deposited the fd of `token`; the token stays (FdTokenTable::DepositorOf).
  absl::StatusOr<std::shared_ptr<PeerProcess>> DepositorOf(const std::string& token) const;

  // Serves "V" requests through `redeemer` from now on (null: answered
  // "ERR views are off"). REQUIRES: `redeemer` stays callable until it is
  // replaced or the listener is destroyed.
  void set_view_redeemer(ViewRedeemer redeemer);

  // Unclaimed fds held now; connections open now.
  int64_t pending() const { return tokens_.size(); }
  int64_t connections() const;

 private:
  struct Connection {
    absl::Time deadline;
    std::shared_ptr<PeerProcess> peer;
    std::string pending;  // a "V" request's bytes so far
  };
  FdPassingListener(std::string address, int listen_fd, int epoll_fd, int wake_fd,
                    FdPassingOptions options);
  void Serve();
  void AcceptAll();
  // Reads the request of `conn` if it arrived; true when the connection is
  // done (answered or broken) and must be closed.
  bool HandleReadable(int conn, const Connection& state);
  // Answers a complete "V<token>\n" request.
  void RedeemView(int conn, const std::string& token, const std::shared_ptr<PeerProcess>& peer);
  void CloseConnection(int conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Closes connections past their deadline; the time until the next one.
  absl::Duration ExpireConnections(absl::Time now);
  // accept failed for want of fds: accepts one pending connection with the
  // spare fd and refuses it ("ERR ... out of file descriptors"); false when
  // there was none to accept (or no spare fd).
  bool RefuseWithSpareFd();
  // Why a new connection from `peer` is refused ("" when it is not).
  std::string ConnectionRefusalLocked(const PeerProcess& peer) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string address_;
  const int listen_fd_;
  const int epoll_fd_;
  const int wake_fd_;  // eventfd: written to stop Serve
  // Kept open to be given up when accept runs out of fds (Serve's thread).
  int spare_fd_ = -1;
  const FdPassingOptions options_;
  FdTokenTable tokens_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Connection> connections_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<pid_t, int64_t> per_process_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, int64_t> per_uid_ ABSL_GUARDED_BY(mu_);
  ViewRedeemer redeemer_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_FD_PASSING_LISTENER_H_
