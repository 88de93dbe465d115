#include "server/cluster/cluster.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {
namespace {

// How long a join attempt waits before retrying when the coordinator is
// not up yet.
constexpr absl::Duration kJoinRetry = absl::Milliseconds(200);

}  // namespace

Cluster::Cluster(ClusterConfig config, CoordinatorConnector connect)
    : config_(std::move(config)), connect_(std::move(connect)) {
  auto single = std::make_shared<ClusterView>();
  single->num_processes = std::max(config_.num_processes, 1);
  single->state = config_.enabled() ? ClusterState::kForming : ClusterState::kSingle;
  view_ = std::move(single);
}

void Cluster::SetAddresses(std::string peer_address, std::string gloo_hostname) {
  config_.peer_address = std::move(peer_address);
  config_.gloo_hostname = std::move(gloo_hostname);
  if (config_.coordinator.empty()) config_.coordinator = config_.peer_address;
  coordinator_ = connect_(config_.coordinator);
}

Cluster::~Cluster() { StopHeartbeats(); }

void Cluster::StopHeartbeats() {
  absl::MutexLock lock(&stop_mu_);
  if (!stop_.HasBeenNotified()) stop_.Notify();
  {
    absl::MutexLock lock(&beat_mu_);
    stopping_ = true;
  }
  if (heartbeats_.joinable()) heartbeats_.join();
}

void Cluster::AddListener(std::function<void(const ClusterEvent&)> listener) {
  listeners_.push_back(std::move(listener));
}

std::shared_ptr<const ClusterView> Cluster::view() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

int32_t Cluster::ProcessOf(int64_t device_id) const {
  if (!enabled()) return config_.process_index;
  absl::MutexLock lock(&mu_);
  for (size_t p = 0; p < ranges_.size(); ++p) {
    const auto& [first, count] = ranges_[p];
    if (device_id >= first && device_id < first + count) return static_cast<int32_t>(p);
  }
  return -1;
}

std::vector<int32_t> Cluster::AlivePeers() const {
  std::vector<int32_t> out;
  std::shared_ptr<const ClusterView> v = view();
  for (const ProcessRecord& p : v->processes) {
    if (p.process_index != process_index() && p.state == ProcessState::kAlive) {
      out.push_back(p.process_index);
    }
  }
  return out;
}

std::vector<int32_t> Cluster::ProcessesOf(absl::Span<const int64_t> device_ids) const {
  std::vector<int32_t> out;
  for (int64_t id : device_ids) {
    const int32_t p = ProcessOf(id);
    if (p >= 0) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::Status Cluster::CheckAlive(absl::Span<const int32_t> processes) const {
  if (!enabled()) return absl::OkStatus();
  std::shared_ptr<const ClusterView> v = view();
  if (v->state == ClusterState::kFailed) {
    return absl::UnavailableError(absl::StrCat("process 0, the cluster's coordinator at ",
                                               config_.coordinator,
                                               ", is unreachable; cross-daemon operations fail "
                                               "until it is back"));
  }
  for (int32_t p : processes) {
    if (!v->IsAlive(p)) return ProcessGoneError(*v, p);
  }
  return absl::OkStatus();
}

absl::Status ProcessGoneError(const ClusterView& view, int32_t process) {
  const bool left = process >= 0 && process < static_cast<int32_t>(view.processes.size()) &&
                    view.processes[process].state == ProcessState::kLeft;
  return absl::UnavailableError(
      absl::StrCat(view.Describe(process),
                   left ? " left the cluster (drained; epoch "
                        : " is lost (missed its heartbeats: killed, crashed or cut off; epoch ",
                   view.epoch, ")"));
}

std::string Cluster::PeerAddress(int32_t process_index) const {
  std::shared_ptr<const ClusterView> v = view();
  if (process_index < 0 || process_index >= static_cast<int32_t>(v->processes.size())) return "";
  return v->processes[process_index].peer_address;
}

absl::StatusOr<std::shared_ptr<const ClusterView>> Cluster::Join(
    std::vector<DeviceDescription> devices, std::string instance_id) {
  if (!enabled()) return absl::FailedPreconditionError("this daemon is not in a cluster");
  JoinInfo info;
  info.process_index = config_.process_index;
  info.num_processes = config_.num_processes;
  info.instance_id = instance_id;
  info.peer_address = config_.peer_address;
  info.gloo_hostname = config_.gloo_hostname;
  info.devices = devices;
  const absl::Time deadline = absl::Now() + config_.init_timeout;
  absl::Status last;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    absl::StatusOr<ClusterView> joined = coordinator_->Join(info, left);
    if (joined.ok()) {
      const ProcessRecord& self = joined->processes[config_.process_index];
      if (self.devices.size() != devices.size()) {
        return absl::InternalError(absl::StrCat("the coordinator recorded ", self.devices.size(),
                                                " devices for this daemon, which has ",
                                                devices.size()));
      }
      auto view = std::make_shared<const ClusterView>(*std::move(joined));
      absl::MutexLock lock(&mu_);
      local_devices_ = std::move(devices);
      instance_id_ = std::move(instance_id);
      ranges_.clear();
      for (const ProcessRecord& p : view->processes) {
        ranges_.emplace_back(p.first_device_id, static_cast<int64_t>(p.devices.size()));
      }
      view_ = view;
      absl::MutexLock beat_lock(&beat_mu_);
      settled_epoch_ = view->epoch;
      return view;
    }
    last = joined.status();
    if (last.code() == absl::StatusCode::kDeadlineExceeded &&
        !absl::StrContains(last.message(), "coordinator at")) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the cluster did not form within ", absl::FormatDuration(config_.init_timeout),
          " (--cluster_init_timeout): ", last.message()));
    }
    // The coordinator may not be up yet: keep knocking until the deadline.
    if (last.code() != absl::StatusCode::kUnavailable) return last;
    absl::SleepFor(std::min(kJoinRetry, deadline - absl::Now()));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "could not join the cluster through the coordinator at ", config_.coordinator, " within ",
      absl::FormatDuration(config_.init_timeout), " (--cluster_init_timeout)",
      last.ok() ? "" : absl::StrCat(": ", last.message())));
}

void Cluster::StartHeartbeats() {
  if (!enabled()) return;
  heartbeats_ = std::thread([this] { HeartbeatLoop(); });
}

void Cluster::Leave() {
  StopHeartbeats();
  if (!enabled() || coordinator_ == nullptr) return;
  std::string instance;
  {
    absl::MutexLock lock(&mu_);
    instance = instance_id_;
  }
  if (!instance.empty()) coordinator_->Leave(config_.process_index, instance).IgnoreError();
}

void Cluster::HeartbeatLoop() {
  int misses = 0;
  // The coordinator counts as lost once no beat succeeded for the
  // detection bound (interval x misses), however long each failed beat took.
  absl::Time last_success = absl::Now();
  bool asked = false;
  while (SleepUntilNextBeat(&asked)) {
    std::shared_ptr<const ClusterView> current = view();
    std::string instance;
    {
      absl::MutexLock lock(&mu_);
      instance = instance_id_;
    }
    const absl::Time sent = absl::Now();
    // A beat may take longer than the interval on a loaded machine; the
    // coordinator judges liveness by arrival times, not by this deadline.
    absl::StatusOr<ClusterView> beat =
        coordinator_->Heartbeat(config_.process_index, instance, current->epoch,
                                std::max(config_.heartbeat_interval, absl::Seconds(1)));
    if (!beat.ok()) {
      LogDebug("cluster: heartbeat failed after ", absl::FormatDuration(absl::Now() - sent), ": ",
               beat.status().message());
    }
    if (beat.ok()) {
      misses = 0;
      last_success = absl::Now();
      // An answer without processes says the view did not change.
      const bool full = !beat->processes.empty();
      if (full && (beat->epoch != current->epoch || beat->state != current->state ||
                   beat->coordinator_instance_id != current->coordinator_instance_id)) {
        Publish(std::make_shared<const ClusterView>(*std::move(beat)), false, false);
      }
      continue;
    }
    if (beat.status().code() == absl::StatusCode::kNotFound) {
      LogWarning("cluster: the coordinator does not count this daemon as a member (",
                 beat.status().message(), "); joining again");
      std::optional<ClusterView> joined = JoinAgain();
      if (!joined.has_value()) return;  // stopping
      if (joined->coordinator_instance_id == current->coordinator_instance_id) {
        // The same coordinator dropped this daemon (declared it lost, e.g.
        // after a partition): what it held in the cluster is void.
        LogWarning("cluster: this daemon was declared lost; dropping its cluster state");
        auto lost = std::make_shared<ClusterView>(*current);
        lost->processes[config_.process_index].state = ProcessState::kLost;
        Publish(lost, /*self_lost=*/true, false);
      } else {
        // A restarted coordinator (a new incarnation): this daemon's state
        // stays; the new view's epoch, above every epoch of the old
        // incarnation, retires that incarnation's tickets and groups.
        LogWarning("cluster: the coordinator restarted (instance ",
                   current->coordinator_instance_id, " -> ", joined->coordinator_instance_id, ")");
      }
      Publish(std::make_shared<const ClusterView>(*std::move(joined)), false, false);
      misses = 0;
      last_success = absl::Now();
      continue;
    }
    // A beat AwaitEpoch asked for is not a miss (many asked at once while
    // the coordinator is briefly away would count as many); the time
    // since the last success still bounds the wait.
    if (!asked) ++misses;
    if ((misses >= config_.heartbeat_misses ||
         absl::Now() - last_success >= config_.detection_bound()) &&
        current->state != ClusterState::kFailed) {
      LogError("cluster: the coordinator at ", config_.coordinator, " missed ", misses,
               " scheduled heartbeats, none answered for ",
               absl::FormatDuration(absl::Now() - last_success), " (", beat.status().message(),
               "); the cluster has failed until it is back");
      // Only the coordinator's process is known to be gone: the others'
      // tensors stay, and a peer that restarted meanwhile shows as a new
      // instance (lost) in the view of the next formation.
      auto failed = std::make_shared<ClusterView>(*current);
      failed->state = ClusterState::kFailed;
      for (ProcessRecord& p : failed->processes) {
        if (p.process_index == 0) p.state = ProcessState::kLost;
      }
      Publish(failed, false, /*coordinator_lost=*/true);
      if (Rejoin(*current)) {
        misses = 0;
        last_success = absl::Now();
      }
    }
  }
}

bool Cluster::SleepUntilNextBeat(bool* asked) {
  absl::MutexLock lock(&beat_mu_);
  beat_mu_.AwaitWithTimeout(absl::Condition(
                                +[](Cluster* c) ABSL_EXCLUSIVE_LOCKS_REQUIRED(c->beat_mu_) {
                                  return c->beat_now_ || c->stopping_;
                                },
                                this),
                            config_.heartbeat_interval);
  *asked = beat_now_;
  beat_now_ = false;
  return !stopping_;
}

bool Cluster::AwaitEpoch(int64_t epoch, absl::Time deadline) {
  if (!enabled()) return true;
  {
    // Every participated call asks: the usual answer costs one lock.
    absl::MutexLock lock(&beat_mu_);
    if (settled_epoch_ >= epoch) return true;
  }
  // While the view is kFailed the heartbeat thread is joining again and
  // cannot be asked for a beat; the join's answer may still come soon.
  const bool failed = view()->state == ClusterState::kFailed;
  if (failed) deadline = std::min(deadline, absl::Now() + config_.heartbeat_interval);
  struct Waiting {
    Cluster* cluster;
    int64_t epoch;
  } waiting{this, epoch};
  absl::MutexLock lock(&beat_mu_);
  if (settled_epoch_ >= epoch) return true;
  if (!failed) beat_now_ = true;
  beat_mu_.AwaitWithDeadline(
      absl::Condition(
          +[](Waiting* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->cluster->beat_mu_) {
            return w->cluster->settled_epoch_ >= w->epoch || w->cluster->stopping_;
          },
          &waiting),
      deadline);
  return settled_epoch_ >= epoch;
}

bool Cluster::Rejoin(const ClusterView& before) {
  std::optional<ClusterView> joined = JoinAgain();
  if (!joined.has_value()) return false;
  const int32_t self = config_.process_index;
  if (joined->coordinator_instance_id == before.coordinator_instance_id &&
      self < static_cast<int32_t>(before.processes.size()) &&
      joined->processes[self].joins > before.processes[self].joins) {
    // The same coordinator declared this daemon lost while it could not be
    // reached (a partition): the others freed what touched it.
    LogWarning("cluster: this daemon was declared lost; dropping its cluster state");
    auto lost = std::make_shared<ClusterView>(*view());
    lost->processes[self].state = ProcessState::kLost;
    Publish(lost, /*self_lost=*/true, false);
  }
  Publish(std::make_shared<const ClusterView>(*std::move(joined)), false, false);
  return true;
}

std::optional<ClusterView> Cluster::JoinAgain() {
  JoinInfo info;
  {
    absl::MutexLock lock(&mu_);
    info.devices = local_devices_;
    info.instance_id = instance_id_;
  }
  info.process_index = config_.process_index;
  info.num_processes = config_.num_processes;
  info.peer_address = config_.peer_address;
  info.gloo_hostname = config_.gloo_hostname;
  // A restarted coordinator numbers its epochs above this one.
  info.last_epoch = view()->epoch;
  while (!stop_.HasBeenNotified()) {
    absl::StatusOr<ClusterView> joined = coordinator_->Join(info, config_.detection_bound());
    if (!joined.ok()) {
      if (joined.status().code() != absl::StatusCode::kUnavailable &&
          joined.status().code() != absl::StatusCode::kDeadlineExceeded) {
        LogError("cluster: cannot rejoin: ", joined.status().ToString());
      }
      stop_.WaitForNotificationWithTimeout(config_.heartbeat_interval);
      continue;
    }
    bool same_ids = true;
    {
      absl::MutexLock lock(&mu_);
      for (const ProcessRecord& p : joined->processes) {
        if (p.process_index < static_cast<int32_t>(ranges_.size()) &&
            ranges_[p.process_index] !=
                std::make_pair(p.first_device_id, static_cast<int64_t>(p.devices.size()))) {
          same_ids = false;
        }
      }
    }
    if (!same_ids) {
      LogError(
          "cluster: the re-formed cluster moved device ids (a daemon came back with a "
          "different device count); restart every daemon");
      stop_.WaitForNotificationWithTimeout(config_.heartbeat_interval);
      continue;
    }
    LogInfo("cluster: joined again at epoch ", joined->epoch);
    return *std::move(joined);
  }
  return std::nullopt;
}

void Cluster::Publish(std::shared_ptr<const ClusterView> after, bool self_lost,
                      bool coordinator_lost) {
  ClusterEvent event;
  {
    absl::MutexLock lock(&mu_);
    event.before = view_;
    view_ = after;
  }
  event.after = std::move(after);
  event.self_lost = self_lost;
  event.coordinator_lost = coordinator_lost;
  const ClusterView& b = *event.before;
  const ClusterView& a = *event.after;
  for (size_t p = 0; p < a.processes.size(); ++p) {
    const bool was = p < b.processes.size() && b.processes[p].state == ProcessState::kAlive;
    const bool is = a.processes[p].state == ProcessState::kAlive;
    const bool new_instance =
        p < b.processes.size() && a.processes[p].instance_id != b.processes[p].instance_id;
    if (was && (!is || new_instance)) event.lost.push_back(static_cast<int32_t>(p));
    if (is && new_instance && p < b.processes.size() && !b.processes[p].instance_id.empty()) {
      event.rejoined.push_back(static_cast<int32_t>(p));
    }
  }
  for (int32_t p : event.lost) {
    if (p != config_.process_index) CancelCallsTo(p);
  }
  LogInfo("cluster: epoch ", a.epoch, ", state ", ClusterStateName(a.state),
          event.lost.empty() ? "" : absl::StrCat(", ", event.lost.size(), " process(es) lost"));
  for (const auto& listener : listeners_) listener(event);
  absl::MutexLock lock(&beat_mu_);
  settled_epoch_ = std::max(settled_epoch_, a.epoch);
}

void Cluster::CancelCallsTo(int32_t process) {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(process);
  if (it == calls_.end()) return;
  for (CallGuard* guard : it->second) guard->cancel_();
}

Cluster::CallGuard::CallGuard(Cluster* cluster, int32_t process, std::function<void()> cancel)
    : cluster_(cluster), process_(process), cancel_(std::move(cancel)) {
  absl::MutexLock lock(&cluster_->mu_);
  cluster_->calls_[process_].insert(this);
  // Lost between the caller's look at the view and this registration: the
  // view's change cancelled the calls registered then, not this one.
  if (cluster_->enabled() && cluster_->view_ != nullptr && !cluster_->view_->IsAlive(process_) &&
      process_ < static_cast<int32_t>(cluster_->view_->processes.size())) {
    cancel_();
  }
}

Cluster::CallGuard::~CallGuard() {
  absl::MutexLock lock(&cluster_->mu_);
  auto it = cluster_->calls_.find(process_);
  if (it == cluster_->calls_.end()) return;
  it->second.erase(this);
  if (it->second.empty()) cluster_->calls_.erase(it);
}

}  // namespace placement::server
