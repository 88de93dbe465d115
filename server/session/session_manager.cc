#include "server/session/session_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/logging.h"
#include "server/tensor/tenant_access.h"

namespace placement::server {
namespace {

absl::Status SessionNotFound(const std::string& id) {
  return absl::NotFoundError(
      absl::StrCat("session '", id, "' does not exist (closed, expired or never opened)"));
}

}  // namespace

SessionManager::SessionManager(TensorStore* store, SessionOptions options)
    : store_(store), options_(options) {
  sweeper_ = std::thread([this] { SweepLoop(); });
}

SessionManager::~SessionManager() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  sweeper_.join();
}

void SessionManager::SweepLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.sweep_interval);
    if (stopping_) break;
    mu_.Unlock();
    SweepExpired(absl::Now());
    mu_.Lock();
  }
}

absl::StatusOr<SessionManager::Session*> SessionManager::FindLocked(const Caller& caller,
                                                                    const std::string& id,
                                                                    absl::string_view field) const {
  if (id.size() > kMaxSessionIdLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is ", id.size(), " bytes long; session ids are at most ", kMaxSessionIdLength));
  }
  auto it = sessions_.find(id);
  // An expired lease the sweeper has not reached yet is over all the same:
  // it can be neither renewed nor joined.
  if (it == sessions_.end() || !caller.Sees(it->second.tenant) ||
      it->second.expire_time <= absl::Now()) {
    return SessionNotFound(id);
  }
  return const_cast<Session*>(&it->second);
}

SessionSnapshot SessionManager::SnapshotLocked(const std::string& id, const Session& session,
                                               int64_t num_tensors) const {
  return SessionSnapshot{id,          session.tenant,      session.name,
                         session.ttl, session.expire_time, num_tensors};
}

void SessionManager::PruneLocked(Session& session) {
  store_->RetainExisting(&session.tensors);
  session.prune_at = std::max(kPruneFloor, 2 * session.tensors.size());
}

absl::StatusOr<SessionSnapshot> SessionManager::Open(const Caller& caller, absl::Duration ttl,
                                                     std::string name) {
  if (ttl == absl::ZeroDuration()) ttl = options_.default_ttl;
  if (ttl < options_.min_ttl || ttl > options_.max_ttl) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ttl is ", absl::FormatDuration(ttl), "; must be between ",
        absl::FormatDuration(options_.min_ttl), " and ", absl::FormatDuration(options_.max_ttl),
        " (0 selects ", absl::FormatDuration(options_.default_ttl), ")"));
  }
  if (name.size() > kMaxSessionNameLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("name is ", name.size(), " bytes long; at most ", kMaxSessionNameLength));
  }
  absl::MutexLock lock(&mu_);
  if (options_.max_sessions > 0 &&
      static_cast<int64_t>(sessions_.size()) >= options_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot open a session: ", sessions_.size(), " of --max_sessions=", options_.max_sessions,
        " are open; close some (CloseSession) or let them "
        "expire"));
  }
  const auto mine = per_tenant_.find(caller.tenant);
  const int64_t tenant_open = mine == per_tenant_.end() ? 0 : mine->second;
  if (options_.max_sessions_per_tenant > 0 && tenant_open >= options_.max_sessions_per_tenant) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "cannot open a session: the tenant has ", tenant_open, " of --tenant_max_sessions=",
        options_.max_sessions_per_tenant, " open; close some (CloseSession) or let them expire"));
  }
  std::string id;
  do {
    id = absl::StrFormat("s-%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                         absl::Uniform<uint64_t>(bitgen_));
  } while (sessions_.contains(id));
  Session& session = sessions_[id];
  ++per_tenant_[caller.tenant];
  session.tenant = caller.tenant;
  session.name = std::move(name);
  session.ttl = ttl;
  session.expire_time = absl::Now() + ttl;
  return SnapshotLocked(id, session, 0);
}

absl::StatusOr<SessionSnapshot> SessionManager::Renew(const Caller& caller, const std::string& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Session*> session = FindLocked(caller, id);
  if (!session.ok()) return session.status();
  (*session)->expire_time = absl::Now() + (*session)->ttl;
  // An idle session forgets its deleted tensors too; what is left lives.
  PruneLocked(**session);
  return SnapshotLocked(id, **session, static_cast<int64_t>((*session)->tensors.size()));
}

absl::StatusOr<int64_t> SessionManager::Close(const Caller& caller, const std::string& id) {
  absl::flat_hash_set<std::string> tensors;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Session*> session = FindLocked(caller, id);
    if (!session.ok()) return session.status();
    tensors = std::move((*session)->tensors);
    ending_.insert(tensors.begin(), tensors.end());
    ForgetLocked((*session)->tenant);
    sessions_.erase(id);
  }
  NotifyEnded(id);
  const int64_t deleted = DeleteEnding(tensors);
  for (const auto& listener : end_listeners_) listener(id);
  return deleted;
}

void SessionManager::AddEndListener(std::function<void(const std::string& id)> listener) {
  end_listeners_.push_back(std::move(listener));
}

bool SessionManager::IsOpen(const std::string& id) const {
  absl::MutexLock lock(&mu_);
  return sessions_.contains(id);
}

std::string SessionManager::SessionOf(const std::string& tensor_id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, session] : sessions_) {
    if (session.tensors.contains(tensor_id)) return id;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<SessionManager::Watch>> SessionManager::WatchSession(
    const std::string& id, std::function<void()> on_end) {
  absl::MutexLock lock(&mu_);
  if (!sessions_.contains(id)) {
    return absl::NotFoundError(absl::StrCat("placement-session metadata: session '", id,
                                            "' does not exist (closed, expired or never opened)"));
  }
  auto watcher = std::make_shared<Watcher>();
  watcher->on_end = std::move(on_end);
  absl::MutexLock watch_lock(&watch_mu_);
  const int64_t key = next_watch_++;
  watchers_[id][key] = watcher;
  return std::unique_ptr<Watch>(new Watch(this, id, key, std::move(watcher)));
}

SessionManager::Watch::~Watch() {
  {
    absl::MutexLock lock(&manager_->watch_mu_);
    auto it = manager_->watchers_.find(id_);
    if (it != manager_->watchers_.end()) {
      it->second.erase(key_);
      if (it->second.empty()) manager_->watchers_.erase(it);
    }
  }
  if (watcher_->running.load() == std::this_thread::get_id()) return;  // from inside on_end
  absl::MutexLock lock(&watcher_->mu);  // waits for a run on another thread
  watcher_->done = true;
}

void SessionManager::NotifyEnded(const std::string& id) {
  std::vector<std::shared_ptr<Watcher>> ended;
  {
    absl::MutexLock lock(&watch_mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    for (auto& [key, watcher] : it->second) ended.push_back(std::move(watcher));
    watchers_.erase(it);
  }
  for (const auto& watcher : ended) {
    watcher->running = std::this_thread::get_id();
    {
      absl::MutexLock lock(&watcher->mu);
      if (!watcher->done) {
        watcher->done = true;
        watcher->on_end();
      }
    }
    watcher->running = std::thread::id();
  }
}

absl::Status SessionManager::CheckJoin(const Caller& caller, const std::string& id) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Session*> session = FindLocked(caller, id, "its value");
  if (!session.ok()) {
    return absl::Status(session.status().code(),
                        absl::StrCat("placement-session metadata: ", session.status().message()));
  }
  return absl::OkStatus();
}

absl::Status SessionManager::Adopt(const std::string& id,
                                   const std::vector<std::string>& tensor_ids) {
  if (tensor_ids.empty()) return absl::OkStatus();
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end()) {
      Session& session = it->second;
      session.tensors.insert(tensor_ids.begin(), tensor_ids.end());
      // Deleting a tensor does not tell its session: a session of a long
      // training loop would remember every result it ever made. Pruning
      // when the set doubled costs O(1) amortized per adopted id.
      if (session.tensors.size() >= session.prune_at) PruneLocked(session);
      return absl::OkStatus();
    }
  }
  store_->DeleteExisting(tensor_ids);
  return absl::FailedPreconditionError(
      absl::StrCat("session '", id, "' ended while the call ran; its results were deleted"));
}

absl::Status SessionManager::Persist(const Caller& caller,
                                     const std::vector<std::string>& tensor_ids) {
  absl::StatusOr<std::vector<std::string>> ids =
      ResolveTensorIds(*store_, caller, tensor_ids, "tensor_ids");
  if (!ids.ok()) return ids.status();
  absl::MutexLock lock(&mu_);
  // A session that ended just now is still deleting its tensors: once its
  // DeleteEnding has taken them (deleting_) they are lost (OK means kept);
  // before that, persisting wins (DeleteEnding skips what left ending_).
  for (const std::string& tensor : *ids) {
    if (deleting_.contains(tensor)) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor '", tensor,
                       "' is being deleted: its session ended (closed, or its lease expired)"));
    }
  }
  // Deleted since they were resolved (their session's DeleteEnding ran in
  // between): NOT_FOUND, as for any unknown id. (Lock order: mu_, then the
  // store's.)
  if (absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> still = store_->GetMany(*ids);
      !still.ok()) {
    return still.status();
  }
  for (auto& [id, session] : sessions_) {
    for (const std::string& tensor : *ids) session.tensors.erase(tensor);
  }
  for (const std::string& tensor : *ids) ending_.erase(tensor);
  return absl::OkStatus();
}

std::vector<SessionSnapshot> SessionManager::List(const Caller& caller) const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionSnapshot> out;
  for (const auto& [id, session] : sessions_) {
    if (caller.Sees(session.tenant)) {
      out.push_back(SnapshotLocked(id, session, store_->CountExisting(session.tensors)));
    }
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

void SessionManager::ForgetLocked(const std::string& tenant) {
  auto it = per_tenant_.find(tenant);
  if (it != per_tenant_.end() && --it->second == 0) per_tenant_.erase(it);
}

int64_t SessionManager::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(sessions_.size());
}

int64_t SessionManager::size(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = per_tenant_.find(tenant);
  return it == per_tenant_.end() ? 0 : it->second;
}

int64_t SessionManager::tensor_count(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, session] : sessions_) {
    if (session.tenant == tenant) n += static_cast<int64_t>(session.tensors.size());
  }
  return n;
}

int64_t SessionManager::tensor_count() const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, session] : sessions_) n += static_cast<int64_t>(session.tensors.size());
  return n;
}

int64_t SessionManager::SweepExpired(absl::Time now) {
  std::vector<std::pair<std::string, absl::flat_hash_set<std::string>>> expired;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = sessions_.begin(); it != sessions_.end();) {
      if (it->second.expire_time <= now) {
        ending_.insert(it->second.tensors.begin(), it->second.tensors.end());
        expired.emplace_back(it->first, std::move(it->second.tensors));
        ForgetLocked(it->second.tenant);
        sessions_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [id, tensors] : expired) {
    NotifyEnded(id);
    const int64_t deleted = DeleteEnding(tensors);
    for (const auto& listener : end_listeners_) listener(id);
    LogInfo("session ", id, " expired (lease not renewed); deleted ", deleted, " tensor(s)");
  }
  return static_cast<int64_t>(expired.size());
}

int64_t SessionManager::DeleteEnding(const absl::flat_hash_set<std::string>& ids) {
  std::vector<std::string> deleting;
  {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : ids) {
      if (!ending_.erase(id)) continue;  // persisted meanwhile
      deleting_.insert(id);              // Persist refuses it from now on
      deleting.push_back(id);
    }
  }
  // One store call (one cluster broadcast); tensors deleted or donated
  // meanwhile are simply gone.
  const int64_t deleted = static_cast<int64_t>(store_->DeleteExisting(deleting).size());
  absl::MutexLock lock(&mu_);
  for (const std::string& id : deleting) deleting_.erase(id);
  return deleted;
}

}  // namespace placement::server
