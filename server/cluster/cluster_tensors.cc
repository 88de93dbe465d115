#include "server/cluster/cluster_tensors.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/cluster/fan_out.h"
#include "server/logging.h"

namespace placement::server {
namespace {

bool TouchesAny(const Tensor& t, const std::vector<int32_t>& processes) {
  for (const Shard& s : t.shards) {
    if (std::find(processes.begin(), processes.end(), s.process_index) != processes.end()) {
      return true;
    }
  }
  return false;
}

}  // namespace

ClusterTensors::ClusterTensors(Cluster* cluster, TensorStore* store, PeerTransport* peers,
                               absl::Duration pending_lifetime)
    : cluster_(cluster), store_(store), peers_(peers), pending_lifetime_(pending_lifetime) {
  reaper_ = std::thread([this] { ReapLoop(); });
}

ClusterTensors::~ClusterTensors() {
  stop_.Notify();
  reaper_.join();
}

void ClusterTensors::Attach() {
  TensorStoreHooks hooks;
  Cluster* cluster = cluster_;
  hooks.is_remote = [cluster](int64_t device) { return !cluster->IsLocalDevice(device); };
  hooks.process_of = [cluster](int64_t device) { return cluster->ProcessOf(device); };
  hooks.on_commit = [this](const Tensor& t) { OnCommit(t); };
  hooks.on_delete = [this](const std::vector<std::string>& ids) { OnDelete(ids); };
  store_->set_hooks(std::move(hooks));
  cluster_->AddListener([this](const ClusterEvent& event) { OnClusterEvent(event); });
}

void ClusterTensors::OnCommit(const Tensor& tensor) {
  const std::vector<int32_t> peers = cluster_->AlivePeers();
  if (peers.empty()) return;
  absl::Status status = FanOutCall(peers_, peers, &PeerTransport::StartCommit)({&tensor}, {});
  if (!status.ok()) {
    // The peer that missed it is failing; it resyncs when it joins again.
    LogWarning("cluster: tensor ", tensor.id,
               " was not recorded on every daemon: ", status.message());
  }
}

void ClusterTensors::OnDelete(const std::vector<std::string>& ids) {
  DeleteOnPeers(ids, cluster_->AlivePeers());
}

void ClusterTensors::DeleteOnPeers(const std::vector<std::string>& ids,
                                   const std::vector<int32_t>& peers) {
  if (peers.empty() || ids.empty()) return;
  absl::Status status = FanOutCall(peers_, peers, &PeerTransport::StartDeleteTensors)(ids);
  if (!status.ok()) {
    LogWarning("cluster: a delete did not reach every daemon: ", status.message());
  }
}

absl::Status ClusterTensors::AddPending(std::unique_ptr<Tensor> tensor, int32_t driver,
                                        absl::Duration lifetime) {
  if (store_->Get(tensor->id).ok()) {
    return absl::AlreadyExistsError(absl::StrCat("tensor '", tensor->id, "' already exists"));
  }
  absl::MutexLock lock(&mu_);
  const std::string id = tensor->id;
  if (aborted_.contains(id)) {
    return absl::AbortedError(
        absl::StrCat("tensor '", id, "' was aborted by the daemon driving its operation"));
  }
  if (lifetime <= absl::ZeroDuration()) lifetime = pending_lifetime_;
  auto [it, inserted] =
      pending_.emplace(id, Pending{std::move(tensor), absl::Now() + lifetime, driver});
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrCat("tensor '", id, "' is already being prepared"));
  }
  return absl::OkStatus();
}

absl::Status ClusterTensors::CommitHere(std::vector<std::unique_ptr<Tensor>> records,
                                        const std::vector<std::string>& delete_ids) {
  absl::Status first;
  for (std::unique_ptr<Tensor>& record : records) {
    std::unique_ptr<Tensor> prepared;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(record->id);
      if (it != pending_.end()) {
        prepared = std::move(it->second.tensor);
        pending_.erase(it);
      }
    }
    if (prepared != nullptr) {
      // The record is authoritative for names and ownership; the buffers
      // are ours.
      prepared->name = record->name;
      prepared->owner = record->owner;
      prepared->session_id = record->session_id;
      prepared->mesh_id = record->mesh_id;
      const std::string id = prepared->id;
      store_->Install(std::move(prepared)).IgnoreError();
      // An Abort that came while it was being installed (AbortForDriver
      // marks the id before it deletes) may have missed it: it goes now.
      bool aborted = false;
      {
        absl::MutexLock lock(&mu_);
        aborted = aborted_.contains(id);
      }
      if (aborted) store_->DeleteHere({id});
      continue;
    }
    if (store_->Get(record->id).ok()) continue;
    bool has_local = false;
    for (const Shard& s : record->shards) has_local |= s.process_index == cluster_->process_index();
    if (has_local) {
      if (first.ok()) {
        first = absl::FailedPreconditionError(absl::StrCat(
            "tensor '", record->id, "' has shards on this daemon (process ",
            cluster_->process_index(), ") that were never prepared or were already freed"));
      }
      continue;
    }
    store_->Install(std::move(record)).IgnoreError();
  }
  if (!delete_ids.empty()) store_->DeleteHere(delete_ids);
  return first;
}

void ClusterTensors::AbortHere(const std::vector<std::string>& ids) {
  std::vector<std::unique_ptr<Tensor>> freed;
  absl::MutexLock lock(&mu_);
  for (const std::string& id : ids) {
    auto it = pending_.find(id);
    if (it == pending_.end()) continue;
    freed.push_back(std::move(it->second.tensor));
    pending_.erase(it);
  }
}

void ClusterTensors::AbortForDriver(const std::vector<std::string>& ids) {
  {
    absl::MutexLock lock(&mu_);
    const absl::Time expires = absl::Now() + pending_lifetime_;
    for (const std::string& id : ids) aborted_[id] = expires;
  }
  DeleteHere(ids);
}

int64_t ClusterTensors::DeleteHere(const std::vector<std::string>& ids) {
  AbortHere(ids);
  return store_->DeleteHere(ids);
}

void ClusterTensors::DeleteEverywhere(const std::vector<std::string>& ids) {
  if (ids.empty()) return;
  DeleteHere(ids);
  DeleteOnPeers(ids, cluster_->AlivePeers());
}

int64_t ClusterTensors::pending_count() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(pending_.size());
}

absl::Status ClusterTensors::CommitEverywhere(std::vector<std::unique_ptr<Tensor>> tensors,
                                              const std::vector<std::string>& delete_ids,
                                              std::vector<std::shared_ptr<const Tensor>>* out,
                                              const std::vector<int32_t>& installed) {
  std::vector<const Tensor*> records;
  for (const auto& t : tensors) records.push_back(t.get());
  std::vector<int32_t> peers = cluster_->AlivePeers();
  std::erase_if(peers, [&](int32_t p) {
    return std::find(installed.begin(), installed.end(), p) != installed.end();
  });
  absl::Status remote = FanOutCall(peers_, peers, &PeerTransport::StartCommit)(records, delete_ids);
  std::vector<std::string> ids;
  for (const auto& t : tensors) ids.push_back(t->id);
  absl::Status here = CommitHere(std::move(tensors), delete_ids);
  if (out != nullptr) {
    for (const std::string& id : ids) {
      absl::StatusOr<std::shared_ptr<const Tensor>> t = store_->Get(id);
      if (t.ok()) out->push_back(*std::move(t));
    }
  }
  if (!here.ok()) return here;
  return remote;
}

void ClusterTensors::AbortOn(const std::vector<int32_t>& processes,
                             const std::vector<std::string>& ids) {
  std::vector<int32_t> others;
  for (int32_t p : processes) {
    if (p == cluster_->process_index()) {
      AbortHere(ids);
    } else if (cluster_->view()->IsAlive(p)) {
      others.push_back(p);
    }
  }
  std::vector<absl::Status> outcomes(others.size());
  FanOutAsync(others, [&](int32_t p, PeerTransport::Done done) {
    const size_t i =
        static_cast<size_t>(std::find(others.begin(), others.end(), p) - others.begin());
    return peers_->StartAbort(p, ids, [&outcomes, i, done = std::move(done)](absl::Status s) {
      outcomes[i] = s;
      done(std::move(s));
    });
  }).IgnoreError();
  const absl::Time until = absl::Now() + pending_lifetime_;
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < others.size(); ++i) {
    if (!outcomes[i].ok()) abort_retries_.push_back(AbortRetry{others[i], ids, until});
  }
}

int64_t ClusterTensors::abort_retries() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(abort_retries_.size());
}

void ClusterTensors::RetryAborts() {
  std::vector<AbortRetry> due;
  {
    absl::MutexLock lock(&mu_);
    due.swap(abort_retries_);
  }
  if (due.empty()) return;
  const absl::Time now = absl::Now();
  std::vector<AbortRetry> again;
  for (AbortRetry& retry : due) {
    // A lost process's tensors are freed with it (OnClusterEvent).
    if (!cluster_->view()->IsAlive(retry.process)) continue;
    absl::Status status = peers_->Abort(retry.process, retry.ids);
    if (status.ok()) continue;
    if (now >= retry.until) {
      LogWarning("cluster: process ", retry.process, " never took the abort of ", retry.ids.size(),
                 " tensor(s): ", status.message());
      continue;
    }
    again.push_back(std::move(retry));
  }
  absl::MutexLock lock(&mu_);
  for (AbortRetry& retry : again) abort_retries_.push_back(std::move(retry));
}

absl::Status ClusterTensors::SyncFrom(int32_t process) {
  std::vector<std::string> held;
  {
    absl::MutexLock lock(&mu_);
    held.swap(held_when_dropped_);
  }
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> records = peers_->ListTensorRecords(process);
  if (!records.ok()) {
    absl::MutexLock lock(&mu_);
    if (held_when_dropped_.empty()) held_when_dropped_ = std::move(held);  // for the next try
    return records.status();
  }
  // Deleted while this daemon was out: no longer listed there.
  absl::flat_hash_set<std::string> listed;
  for (const std::unique_ptr<Tensor>& record : *records) listed.insert(record->id);
  std::erase_if(held, [&](const std::string& id) { return listed.contains(id); });
  const int64_t stale = DeleteHere(held);
  int64_t installed = 0;
  for (std::unique_ptr<Tensor>& record : *records) {
    bool has_local = false;
    for (const Shard& s : record->shards) has_local |= s.process_index == cluster_->process_index();
    if (has_local || store_->Get(record->id).ok()) continue;
    store_->Install(std::move(record)).IgnoreError();
    ++installed;
  }
  LogInfo("cluster: copied ", installed, " tensor record(s) from process ", process, "; deleted ",
          stale, " it no longer has");
  return absl::OkStatus();
}

void ClusterTensors::OnClusterEvent(const ClusterEvent& event) {
  std::vector<int32_t> gone = event.lost;
  // Dropped by the coordinator: the others have freed (or will free) every
  // tensor with a shard here, so this daemon does too. (Losing the
  // coordinator alone frees only what touched process 0, in `lost`: whether
  // this daemon was dropped is known when it joins again, Cluster.)
  if (event.self_lost) gone.push_back(cluster_->process_index());
  if (!gone.empty()) {
    std::vector<std::string> ids =
        store_->DeleteIf([&](const Tensor& t) { return TouchesAny(t, gone); });
    if (event.self_lost) {
      // What is left are other daemons' tensors; those deleted while this
      // one is out go when it is back (SyncFrom).
      std::vector<std::string> held;
      for (const auto& t : store_->List()) held.push_back(t->id);
      absl::MutexLock lock(&mu_);
      held_when_dropped_ = std::move(held);
    }
    std::vector<std::unique_ptr<Tensor>> freed;
    {
      absl::MutexLock lock(&mu_);
      for (auto it = pending_.begin(); it != pending_.end();) {
        const bool driver_gone =
            std::find(gone.begin(), gone.end(), it->second.driver) != gone.end();
        if (driver_gone || TouchesAny(*it->second.tensor, gone)) {
          freed.push_back(std::move(it->second.tensor));
          it = pending_.erase(it);
        } else {
          ++it;
        }
      }
    }
    if (!ids.empty() || !freed.empty()) {
      LogInfo("cluster: freed ", ids.size(), " tensor(s) and ", freed.size(),
              " pending one(s) with shards on lost process(es)");
    }
  }
  // Back in after being dropped (or after the coordinator came back): copy
  // the records made meanwhile.
  const int32_t self = cluster_->process_index();
  const bool was_out = event.before->state == ClusterState::kFailed ||
                       (self < static_cast<int32_t>(event.before->processes.size()) &&
                        event.before->processes[self].state == ProcessState::kLost);
  if (was_out && event.after->IsAlive(self) && self != 0 && event.after->IsAlive(0)) {
    absl::Status synced = SyncFrom(0);
    if (!synced.ok()) LogWarning("cluster: could not copy tensor records: ", synced.message());
  }
}

void ClusterTensors::ReapLoop() {
  while (!stop_.WaitForNotificationWithTimeout(absl::Seconds(1))) {
    RetryAborts();
    std::vector<std::unique_ptr<Tensor>> expired;
    const absl::Time now = absl::Now();
    absl::MutexLock lock(&mu_);
    std::erase_if(aborted_, [&](const auto& entry) { return entry.second <= now; });
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (it->second.expires <= now) {
        LogWarning("cluster: freeing tensor ", it->first,
                   ": prepared but never committed (its driver is gone)");
        expired.push_back(std::move(it->second.tensor));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }
}

}  // namespace placement::server
