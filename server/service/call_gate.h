// CallGate: admits RPCs while serving and refuses them with UNAVAILABLE once
// draining starts, counting calls in flight so shutdown can wait for them.
// Every handler (unary or stream) holds a Ticket for the life of its call.
// Admit also authenticates the call (server/auth/authenticator.h) and tells
// the handler who its caller is.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_CALL_GATE_H_
#define PLACEMENT_SERVER_SERVICE_CALL_GATE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "server/auth/authenticator.h"
#include "server/auth/caller.h"
#include "server/service/stream_registry.h"
#include "server/session/session_manager.h"

namespace placement::server {

class CallGate {
 public:
  class Ticket {
   public:
    Ticket() = default;
    explicit Ticket(CallGate* gate) : gate_(gate) {}
    Ticket(Ticket&& other) noexcept : gate_(other.gate_) { other.gate_ = nullptr; }
    Ticket& operator=(Ticket&& other) noexcept {
      Reset();
      gate_ = other.gate_;
      other.gate_ = nullptr;
      return *this;
    }
    ~Ticket() { Reset(); }
    void Reset();
    bool held() const { return gate_ != nullptr; }

   private:
    CallGate* gate_ = nullptr;
  };

  // UNAVAILABLE ("placementd is draining ...") once StartDraining ran.
  // While not ready (SetNotReady) also UNAVAILABLE, unless `even_if_not_ready`
  // (GetStatus answers while a cluster forms).
  absl::Status Enter(Ticket* ticket, bool even_if_not_ready = false);
  // Enter, then authenticate `context` and join the session its
  // "placement-session" metadata names: the caller, or UNAVAILABLE while
  // draining, UNAUTHENTICATED / PERMISSION_DENIED (see Authenticator),
  // NOT_FOUND for a session that is not the caller's or no longer open. On
  // error the ticket is not held.
  absl::StatusOr<Caller> Admit(const grpc::ServerContextBase& context, Ticket* ticket,
                               bool even_if_not_ready = false);
  // Hands tensors a call committed to the caller's session (no-op outside a
  // session). When the session ended meanwhile they are deleted and the
  // error says so (SessionManager::Adopt).
  absl::Status AdoptCreated(const Caller& caller, const std::vector<std::string>& tensor_ids);
  // For a caller in a session: runs `on_end` once when that session ends
  // (SessionManager::WatchSession); null (nothing to watch) outside a
  // session. NOT_FOUND when the session already ended.
  absl::StatusOr<std::unique_ptr<SessionManager::Watch>> WatchSession(const Caller& caller,
                                                                      std::function<void()> on_end);
  // REQUIRES: called before the server starts; `sessions` outlives the gate.
  void set_sessions(SessionManager* sessions) { sessions_ = sessions; }

  // Registers a long-lived stream of an admitted caller (StreamRegistry):
  // RESOURCE_EXHAUSTED past the stream limits. Uploads and downloads that
  // make no progress for the idle timeout are cancelled through `context`;
  // prefetch streams wait on their consumer by design and are never reaped.
  // Without a registry (tests), an empty lease.
  absl::StatusOr<StreamRegistry::Lease> OpenStream(const Caller& caller,
                                                   grpc::CallbackServerContext* context,
                                                   StreamKind kind);
  // REQUIRES: called before the server starts; `streams` outlives the gate.
  void set_streams(StreamRegistry* streams) { streams_ = streams; }
  // REQUIRES: called before the server starts; `authenticator` outlives the
  // gate. Without one, every caller is the implicit tenant.
  void set_authenticator(const Authenticator* authenticator) { authenticator_ = authenticator; }
  // Whether `caller` is shown the daemon's own figures (GetStatus,
  // ListDevices) and may run daemon-wide operations (TrimMemory): an admin,
  // or anyone when authentication is off (one implicit tenant). Other
  // callers see their tenant's figures.
  bool SeesDaemonWide(const Caller& caller) const {
    return caller.admin() || authenticator_ == nullptr || !authenticator_->enabled();
  }
  void StartDraining();
  bool draining() const;
  // While not ready (a cluster still forming), Enter refuses with
  // UNAVAILABLE and `reason`. Ready by default.
  void SetNotReady(std::string reason);
  void SetReady();
  int64_t in_flight() const;
  // Blocks until no call is in flight or `deadline` passes; true if idle.
  bool WaitIdle(absl::Time deadline);

 private:
  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  std::string not_ready_ ABSL_GUARDED_BY(mu_);  // empty = ready
  int64_t in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  const Authenticator* authenticator_ = nullptr;
  SessionManager* sessions_ = nullptr;
  StreamRegistry* streams_ = nullptr;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_CALL_GATE_H_
