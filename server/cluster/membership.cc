#include "server/cluster/membership.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {

Membership::Membership(MembershipOptions options, DeadlineTimer* timer)
    : options_(std::move(options)), timer_(timer) {
  slots_.resize(static_cast<size_t>(std::max(options_.num_processes, 1)));
  for (size_t i = 0; i < slots_.size(); ++i) {
    slots_[i].record.process_index = static_cast<int32_t>(i);
  }
}

void Membership::AddListener(std::function<void(const ClusterView&)> listener) {
  listeners_.push_back(std::move(listener));
}

ClusterView Membership::ViewLocked() const {
  ClusterView view;
  view.num_processes = options_.num_processes;
  view.epoch = epoch_;
  view.coordinator_instance_id = options_.coordinator_instance_id;
  bool all_alive = true;
  for (const Slot& slot : slots_) {
    view.processes.push_back(slot.record);
    all_alive = all_alive && slot.record.state == ProcessState::kAlive;
  }
  view.state = !formed_    ? ClusterState::kForming
               : all_alive ? ClusterState::kFormed
                           : ClusterState::kDegraded;
  return view;
}

ClusterView Membership::ChangedLocked() {
  epoch_ = std::max(epoch_, epoch_floor_) + 1;
  return ViewLocked();
}

void Membership::Announce(const ClusterView& view) {
  for (const auto& listener : listeners_) listener(view);
}

Membership::~Membership() { Shutdown(); }

void Membership::Shutdown() {
  Completions<ClusterView> done;
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (const auto& wait : waiting_) {
    timer_->Cancel(wait->timer);
    done.Add(wait->Take(), absl::UnavailableError("the coordinator is stopping"));
  }
  waiting_.clear();
}

ClusterView Membership::View() const {
  absl::MutexLock lock(&mu_);
  return ViewLocked();
}

int64_t Membership::epoch() const {
  absl::MutexLock lock(&mu_);
  return epoch_;
}

absl::Status Membership::RegisterLocked(const JoinInfo& info, std::vector<ClusterView>& changes) {
  const int32_t n = options_.num_processes;
  Slot& slot = slots_[info.process_index];
  const absl::Time now = absl::Now();
  epoch_floor_ = std::max(epoch_floor_, info.last_epoch);
  if (slot.record.instance_id != info.instance_id) {
    if (slot.record.state == ProcessState::kAlive &&
        now - slot.last_beat < options_.heartbeat_interval) {
      return absl::AlreadyExistsError(absl::StrCat(
          "process_index ", info.process_index, " is already held by a live daemon (instance ",
          slot.record.instance_id, " at ", slot.record.peer_address,
          "); is --process_index duplicated? It is released once that daemon stops "
          "heartbeating"));
    }
    if (formed_ && static_cast<int64_t>(info.devices.size()) !=
                       static_cast<int64_t>(slot.record.devices.size())) {
      return absl::FailedPreconditionError(absl::StrCat(
          "process ", info.process_index, " rejoined with ", info.devices.size(),
          " device(s), but the cluster assigned it ", slot.record.devices.size(), " (ids ",
          slot.record.first_device_id, "..",
          slot.record.first_device_id + static_cast<int64_t>(slot.record.devices.size()) - 1,
          "); restart it with the same device count"));
    }
  }
  const bool rejoin = slot.ever_joined && slot.record.instance_id != info.instance_id;
  if (rejoin) {
    LogInfo("cluster: process ", info.process_index, " rejoins (instance ", info.instance_id,
            ", previously ", slot.record.instance_id, ")");
    if (slot.record.state == ProcessState::kAlive && formed_) {
      // The old instance is gone: announce its loss before the new one
      // arrives, so whatever waited for it fails.
      slot.record.state = ProcessState::kLost;
      changes.push_back(ChangedLocked());
    }
  }
  const bool was_alive = slot.record.state == ProcessState::kAlive;
  const bool same_instance = slot.record.instance_id == info.instance_id;
  slot.record.instance_id = info.instance_id;
  slot.record.peer_address = info.peer_address;
  slot.record.gloo_hostname = info.gloo_hostname;
  if (!formed_ || !same_instance) {
    // Before formation the ids are assigned below; after it, they are
    // the slot's (a rejoin keeps them).
    const int64_t first = slot.record.first_device_id;
    slot.record.devices = info.devices;
    for (size_t i = 0; i < slot.record.devices.size(); ++i) {
      DeviceDescription& d = slot.record.devices[i];
      d.process_index = info.process_index;
      d.local_index = static_cast<int32_t>(i);
      d.id = first + static_cast<int64_t>(i);
    }
  }
  slot.last_beat = now;
  if (!(was_alive && same_instance)) {
    slot.record.state = ProcessState::kAlive;
    slot.record.joins += 1;
    slot.ever_joined = true;
    if (!formed_) {
      bool all = true;
      for (const Slot& s : slots_) all = all && s.record.state == ProcessState::kAlive;
      if (all) {
        formed_ = true;
        int64_t next = 0;
        for (Slot& s : slots_) {
          s.last_beat = now;  // heartbeats start once Join returns
          s.record.first_device_id = next;
          for (size_t i = 0; i < s.record.devices.size(); ++i) {
            s.record.devices[i].id = next + static_cast<int64_t>(i);
          }
          next += static_cast<int64_t>(s.record.devices.size());
        }
        LogInfo("cluster: formed with ", n, " processes and ", next, " devices");
        changes.push_back(ChangedLocked());
      }
    } else {
      changes.push_back(ChangedLocked());
    }
  }
  return absl::OkStatus();
}

std::string Membership::MissingLocked() const {
  std::vector<int32_t> missing;
  for (const Slot& s : slots_) {
    if (s.record.state != ProcessState::kAlive) missing.push_back(s.record.process_index);
  }
  return absl::StrCat(missing.size(), " of ", options_.num_processes,
                      " processes have not joined (process_index ", absl::StrJoin(missing, ", "),
                      ")");
}

void Membership::Join(const JoinInfo& info, absl::Duration timeout, JoinDone join_done) {
  Completions<ClusterView> done;
  const int32_t n = options_.num_processes;
  if (info.num_processes != n) {
    done.Add(std::move(join_done), absl::InvalidArgumentError(absl::StrCat(
                                       "process ", info.process_index,
                                       " was started with --num_processes=", info.num_processes,
                                       " but the coordinator has --num_processes=", n)));
    return;
  }
  if (info.process_index < 0 || info.process_index >= n) {
    done.Add(std::move(join_done), absl::InvalidArgumentError(absl::StrCat(
                                       "--process_index=", info.process_index, " is outside [0, ",
                                       n, ") for a cluster of ", n, " processes")));
    return;
  }
  if (info.devices.empty()) {
    done.Add(std::move(join_done), absl::InvalidArgumentError(absl::StrCat(
                                       "process ", info.process_index, " joined with no devices")));
    return;
  }
  absl::MutexLock announce(&announce_mu_);
  std::vector<ClusterView> changes;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) {
      done.Add(std::move(join_done), absl::UnavailableError("the coordinator is stopping"));
      return;
    }
    if (absl::Status registered = RegisterLocked(info, changes); !registered.ok()) {
      done.Add(std::move(join_done), registered);
      return;
    }
    if (formed_) {
      // This join formed the cluster, or it had formed before: every
      // waiting join ends with this view.
      const ClusterView view = ViewLocked();
      for (const auto& wait : waiting_) {
        timer_->Cancel(wait->timer);
        done.Add(wait->Take(), view);
      }
      waiting_.clear();
      done.Add(std::move(join_done), view);
    } else {
      auto wait = std::make_shared<AsyncWait<ClusterView>>(std::move(join_done));
      waiting_.push_back(wait);
      wait->timer = timer_->Schedule(absl::Now() + timeout, [this, wait] { TimedOut(wait); });
    }
  }
  // Listeners hear of the change before the joins learn the view.
  for (const ClusterView& view : changes) Announce(view);
}

void Membership::TimedOut(const std::shared_ptr<AsyncWait<ClusterView>>& wait) {
  Completions<ClusterView> done;
  absl::MutexLock lock(&mu_);
  auto it = std::find(waiting_.begin(), waiting_.end(), wait);
  if (it == waiting_.end()) return;
  waiting_.erase(it);
  done.Add(wait->Take(), absl::DeadlineExceededError(MissingLocked()));
}

absl::StatusOr<ClusterView> Membership::JoinBlocking(const JoinInfo& info, absl::Duration timeout) {
  absl::Notification ready;
  absl::StatusOr<ClusterView> result;
  Join(info, timeout, [&](absl::StatusOr<ClusterView> view) {
    result = std::move(view);
    ready.Notify();
  });
  ready.WaitForNotification();
  return result;
}

absl::StatusOr<ClusterView> Membership::Heartbeat(int32_t process_index,
                                                  const std::string& instance_id) {
  absl::MutexLock lock(&mu_);
  if (process_index < 0 || process_index >= static_cast<int32_t>(slots_.size()) ||
      slots_[process_index].record.instance_id != instance_id ||
      slots_[process_index].record.state != ProcessState::kAlive) {
    return absl::NotFoundError(absl::StrCat("instance ", instance_id,
                                            " is not the member at process_index ", process_index,
                                            "; join again"));
  }
  slots_[process_index].last_beat = absl::Now();
  return ViewLocked();
}

void Membership::Leave(int32_t process_index, const std::string& instance_id) {
  absl::MutexLock announce(&announce_mu_);
  std::optional<ClusterView> changed;
  {
    absl::MutexLock lock(&mu_);
    if (process_index < 0 || process_index >= static_cast<int32_t>(slots_.size())) return;
    Slot& slot = slots_[process_index];
    if (slot.record.instance_id != instance_id || slot.record.state != ProcessState::kAlive) return;
    slot.record.state = ProcessState::kLeft;
    LogInfo("cluster: process ", process_index, " left");
    if (formed_) changed = ChangedLocked();
  }
  if (changed) Announce(*changed);
}

void Membership::Sweep(absl::Time now) {
  absl::MutexLock announce(&announce_mu_);
  std::optional<ClusterView> changed;
  {
    absl::MutexLock lock(&mu_);
    // Before formation every member waits inside Join: nobody beats yet.
    if (!formed_) return;
    const absl::Duration allowed = options_.heartbeat_interval * options_.heartbeat_misses;
    bool any = false;
    for (Slot& slot : slots_) {
      if (slot.record.state != ProcessState::kAlive || now - slot.last_beat <= allowed) continue;
      slot.record.state = ProcessState::kLost;
      any = true;
      LogWarning("cluster: process ", slot.record.process_index, " (", slot.record.peer_address,
                 ") is lost: no heartbeat for ", absl::FormatDuration(now - slot.last_beat));
    }
    if (any && formed_) changed = ChangedLocked();
  }
  if (changed) Announce(*changed);
}

}  // namespace placement::server
