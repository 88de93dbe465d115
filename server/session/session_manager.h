// SessionManager: sessions with leases (SessionService). A session belongs to
// the tenant that opened it and holds the tensors that calls joined to it
// created; it ends when closed or when its lease (ttl from the last open or
// renewal) passes without renewal -- a crashed or partitioned client -- and
// then every tensor it still holds is deleted. Tensors created outside any
// session, or persisted, are durable.
//
// A background sweeper ends expired sessions every `sweep_interval`, so a
// session's tensors are gone at most ttl + sweep_interval after its last
// renewal.
//
// Streams that belong to a session (Prefetch) Watch it: when the session
// ends, each watcher's callback runs once, on the thread that ended it
// (CloseSession's handler or the sweeper), so the stream can cancel itself
// and free what it staged.
//
// Thread-safe. The store must outlive the manager; the destructor stops the
// sweeper (tensors of open sessions stay in the store).
#ifndef PLACEMENT_SERVER_SESSION_SESSION_MANAGER_H_
#define PLACEMENT_SERVER_SESSION_SESSION_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth/caller.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

struct SessionOptions {
  absl::Duration default_ttl = absl::Seconds(60);
  absl::Duration min_ttl = absl::Seconds(1);
  absl::Duration max_ttl = absl::Hours(1);
  absl::Duration sweep_interval = absl::Seconds(1);
  // Sessions open at once, in all and per tenant; 0 = unlimited. Past a
  // bound Open is RESOURCE_EXHAUSTED (a session is a record and a lease the
  // sweeper visits; a client looping on OpenSession must not grow them
  // without end).
  int64_t max_sessions = 4096;
  int64_t max_sessions_per_tenant = 1024;
};

struct SessionSnapshot {
  std::string id;
  std::string tenant;
  std::string name;
  absl::Duration ttl;
  absl::Time expire_time;
  int64_t num_tensors = 0;
};

// Session ids are "s-" and 32 hex digits; longer ones are refused unechoed.
inline constexpr size_t kMaxSessionIdLength = 64;
inline constexpr size_t kMaxSessionNameLength = 128;

class SessionManager {
 private:
  struct Watcher;

 public:
  // A registration made by Watch(). Destroying it unregisters: afterwards the
  // callback never starts, and a run in progress on another thread is waited
  // for (a destruction from inside the callback itself does not wait).
  class Watch {
   public:
    ~Watch();
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    friend class SessionManager;
    Watch(SessionManager* manager, std::string id, int64_t key, std::shared_ptr<Watcher> watcher)
        : manager_(manager), id_(std::move(id)), key_(key), watcher_(std::move(watcher)) {}
    SessionManager* const manager_;
    const std::string id_;
    const int64_t key_;
    const std::shared_ptr<Watcher> watcher_;
  };

  SessionManager(TensorStore* store, SessionOptions options);
  ~SessionManager();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // ttl zero = default. INVALID_ARGUMENT for a ttl outside [min, max] or a
  // name longer than kMaxSessionNameLength; RESOURCE_EXHAUSTED when
  // max_sessions or max_sessions_per_tenant are open.
  absl::StatusOr<SessionSnapshot> Open(const Caller& caller, absl::Duration ttl, std::string name);
  // NOT_FOUND for unknown, expired or other tenants' sessions (admins see all).
  absl::StatusOr<SessionSnapshot> Renew(const Caller& caller, const std::string& id);
  // Ends the session now; returns how many tensors were deleted.
  absl::StatusOr<int64_t> Close(const Caller& caller, const std::string& id);
  // OK when `caller` may join calls to session `id`; NOT_FOUND / INVALID_ARGUMENT
  // (field "placement-session metadata") otherwise.
  absl::Status CheckJoin(const Caller& caller, const std::string& id) const;
  // Adds committed tensors to session `id`. When the session ended since the
  // call joined it, deletes them and returns FAILED_PRECONDITION.
  // REQUIRES: the ids are committed (in the store): a prune forgets an id
  // the store does not have.
  absl::Status Adopt(const std::string& id, const std::vector<std::string>& tensor_ids);
  // Makes the tensors durable (takes them out of their sessions). Ids must
  // be visible to the caller (NOT_FOUND otherwise, nothing changed).
  // FAILED_PRECONDITION, nothing changed, for a tensor its ended session is
  // deleting at this moment; OK means every tensor is kept.
  absl::Status Persist(const Caller& caller, const std::vector<std::string>& tensor_ids);

  // Runs `on_end` once when session `id` ends (closed or expired), on the
  // ending thread, before the session's tensors are deleted. NOT_FOUND
  // (field "placement-session metadata") when it is not open now.
  // REQUIRES: the Watch is destroyed before the manager.
  absl::StatusOr<std::unique_ptr<Watch>> WatchSession(const std::string& id,
                                                      std::function<void()> on_end);
  // Called with the id of every session that ends (closed or expired), after
  // its tensors are deleted, outside the manager's lock: other components
  // free what the session held (regions). REQUIRES: before serving.
  void AddEndListener(std::function<void(const std::string& id)> listener);
  // Whether session `id` is open now (any tenant).
  bool IsOpen(const std::string& id) const;
  // The open session holding tensor `tensor_id`, or "" (a durable tensor).
  std::string SessionOf(const std::string& tensor_id) const;

  std::vector<SessionSnapshot> List(const Caller& caller) const;
  int64_t size() const;
  // Tensors open sessions remember, over all of them: a tensor deleted since
  // its session's last prune (its lease renewal, or Adopt finding the set
  // doubled) still counts. O(sessions).
  int64_t tensor_count() const;
  // The same for one tenant's sessions.
  int64_t size(const std::string& tenant) const;
  int64_t tensor_count(const std::string& tenant) const;

  // Ends every session whose lease passed before `now`; returns how many.
  int64_t SweepExpired(absl::Time now);

  // A session remembers at most twice the tensors it had at its last prune
  // plus this many, however many it adopted over its life.
  static constexpr size_t kPruneFloor = 1024;

 private:
  struct Session {
    std::string tenant;
    std::string name;
    absl::Duration ttl;
    absl::Time expire_time;
    // Adopted ids; a tensor deleted by a call (or DONATEd) stays here
    // until the next prune.
    absl::flat_hash_set<std::string> tensors;
    // Adopt prunes when `tensors` reaches this size.
    size_t prune_at = kPruneFloor;
  };
  // Keeps the ids of `session` still in the store (one store lock) and
  // sets prune_at to twice what is left (>= kPruneFloor).
  void PruneLocked(Session& session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The open session `id` of the caller's tenant: NOT_FOUND for unknown,
  // expired (swept or not) or other tenants' sessions; INVALID_ARGUMENT
  // naming `field` for an id too long to be one.
  absl::StatusOr<Session*> FindLocked(const Caller& caller, const std::string& id,
                                      absl::string_view field = "session_id") const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `session` as listed, with `num_tensors` of its tensors alive.
  SessionSnapshot SnapshotLocked(const std::string& id, const Session& session,
                                 int64_t num_tensors) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  struct Watcher {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;   // ran, or unregistered
    std::atomic<std::thread::id> running{};  // the thread inside on_end
    std::function<void()> on_end;
  };
  // Counts one session of `tenant` less.
  void ForgetLocked(const std::string& tenant) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Runs and forgets the watchers of ended session `id` (outside mu_).
  void NotifyEnded(const std::string& id);
  // Deletes the tensors of an ended session that still exist (outside mu_,
  // with one store call), but those persisted since it ended (Persist takes
  // them out of ending_).
  int64_t DeleteEnding(const absl::flat_hash_set<std::string>& ids);
  void SweepLoop();

  TensorStore* const store_;
  const SessionOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Session> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> per_tenant_ ABSL_GUARDED_BY(mu_);
  // Tensors of ended sessions not deleted yet (DeleteEnding), and those it
  // is deleting now (Persist refuses them: it would answer OK for a tensor
  // about to go).
  absl::flat_hash_set<std::string> ending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> deleting_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Lock order: mu_, then watch_mu_.
  absl::Mutex watch_mu_;
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, std::shared_ptr<Watcher>>> watchers_
      ABSL_GUARDED_BY(watch_mu_);
  int64_t next_watch_ ABSL_GUARDED_BY(watch_mu_) = 1;
  std::vector<std::function<void(const std::string&)>> end_listeners_;
  std::thread sweeper_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SESSION_SESSION_MANAGER_H_
