// placement::client::Session -- a session with a lease (SessionService,
// docs/api/sessions.md), renewed in the background while this object lives.
//
//   auto session = pc::Session::Open(*client, absl::Seconds(30));
//   pc::ClientOptions scoped = options;
//   scoped.session_id = (*session)->id();     // calls on this client join it
//   auto worker = pc::Client::Connect(target, scoped);
//
// Tensors created by calls that carry the session id are freed when the
// session is closed (Close() or the destructor) or when renewals stop for a
// whole ttl -- a crashed or partitioned process -- so a trainer that dies
// leaves nothing behind. Renewals go every ttl / 3, each bounded by a third
// of the ttl (and the Client's default deadline); one that fails otherwise
// (a stalled daemon, the network) is tried again within a second, not a
// period later, while the lease lasts. A renewal that fails NOT_FOUND (the
// lease already ran out) stops them and is reported by lost(). Close()
// cancels a renewal in flight rather than wait for it.
//
// Thread-safe. The Client must outlive the Session.
#ifndef PLACEMENT_CLIENT_SESSION_H_
#define PLACEMENT_CLIENT_SESSION_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "placement/client/client.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace placement::client {

class Session {
 public:
  // Opens a session (ttl zero = the daemon's default, 60 s) and starts
  // renewing it. The daemon's errors (INVALID_ARGUMENT for a ttl outside
  // 1 s .. 1 h) keep their code.
  static absl::StatusOr<std::unique_ptr<Session>> Open(const Client& client,
                                                       absl::Duration ttl = absl::ZeroDuration(),
                                                       const std::string& name = "");
  // Closes the session (deleting its tensors) if Close was not called.
  ~Session();

  const std::string& id() const { return id_; }
  absl::Duration ttl() const { return ttl_; }
  // Successful renewals so far.
  int64_t renewals() const { return renewals_.load(); }
  // True once a renewal found the session gone.
  bool lost() const { return lost_.load(); }

  // Stops renewing and ends the session now; returns how many tensors the
  // daemon deleted. Idempotent (later calls return 0).
  absl::StatusOr<int64_t> Close();

 private:
  Session(const Client& client, std::string id, absl::Duration ttl);
  void RenewLoop();

  const Client& client_;
  const std::string id_;
  const absl::Duration ttl_;
  std::atomic<int64_t> renewals_{0};
  std::atomic<bool> lost_{false};
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  // The renewal in flight (Close cancels it); null between renewals.
  grpc::ClientContext* renewing_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::thread renewer_;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SESSION_H_
