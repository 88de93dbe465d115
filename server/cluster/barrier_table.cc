#include "server/cluster/barrier_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace placement::server {

namespace {

// "process 1 is lost (missed its heartbeats: killed, crashed or cut off;
// epoch 4)", "process 2 left the cluster (drained; epoch 4)", joined by "; ".
std::string GoneText(const std::vector<std::pair<int32_t, ProcessState>>& gone, int64_t epoch) {
  std::vector<std::string> parts;
  for (const auto& [p, state] : gone) {
    parts.push_back(
        state == ProcessState::kLeft
            ? absl::StrCat("process ", p, " left the cluster (drained; epoch ", epoch, ")")
            : absl::StrCat("process ", p,
                           " is lost (missed its heartbeats: killed, crashed or cut "
                           "off; epoch ",
                           epoch, ")"));
  }
  return absl::StrJoin(parts, "; ");
}

absl::Status CheckArrival(const BarrierArrival& arrival) {
  if (arrival.barrier_id.empty() || arrival.barrier_id.size() > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier_id is ", arrival.barrier_id.size(), " bytes; ids are 1..1024 bytes"));
  }
  if (arrival.payload.size() > BarrierTable::kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("barrier payload is ", arrival.payload.size(),
                                                   " bytes; at most ",
                                                   BarrierTable::kMaxPayloadBytes));
  }
  if (arrival.participants.empty() ||
      !std::is_sorted(arrival.participants.begin(), arrival.participants.end()) ||
      std::adjacent_find(arrival.participants.begin(), arrival.participants.end()) !=
          arrival.participants.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier '", arrival.barrier_id, "': participants must be distinct and ascending, got [",
        absl::StrJoin(arrival.participants, ","), "]"));
  }
  if (!std::binary_search(arrival.participants.begin(), arrival.participants.end(),
                          arrival.process_index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier '", arrival.barrier_id, "': process ", arrival.process_index,
        " is not among its participants [", absl::StrJoin(arrival.participants, ","), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

BarrierTable::~BarrierTable() { Shutdown(); }

void BarrierTable::Arrive(const BarrierArrival& arrival, ArriveDone arrive_done) {
  Completions<BarrierResult> done;
  if (absl::Status valid = CheckArrival(arrival); !valid.ok()) {
    done.Add(std::move(arrive_done), valid);
    return;
  }
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    done.Add(std::move(arrive_done), absl::UnavailableError("the coordinator is stopping"));
    return;
  }
  for (const auto& [p, state] : gone_) {
    if (std::find(arrival.participants.begin(), arrival.participants.end(), p) !=
        arrival.participants.end()) {
      done.Add(std::move(arrive_done),
               absl::UnavailableError(absl::StrCat("barrier '", arrival.barrier_id,
                                                   "': ", GoneText({{p, state}}, epoch_))));
      return;
    }
  }
  std::shared_ptr<Instance>& slot = open_[arrival.barrier_id];
  if (slot == nullptr) {
    if (open_.size() > kMaxOpenBarriers) {
      open_.erase(arrival.barrier_id);
      done.Add(std::move(arrive_done),
               absl::ResourceExhaustedError(absl::StrCat(
                   kMaxOpenBarriers, " barriers are open; their participants never arrived")));
      return;
    }
    slot = std::make_shared<Instance>();
    slot->id = arrival.barrier_id;
    slot->participants = arrival.participants;
    slot->sequence_key = arrival.sequence_key;
  } else if (slot->participants != arrival.participants) {
    done.Add(std::move(arrive_done),
             absl::InvalidArgumentError(absl::StrCat(
                 "barrier '", arrival.barrier_id, "': process ", arrival.process_index,
                 " names participants [", absl::StrJoin(arrival.participants, ","),
                 "] but the first arrival named [", absl::StrJoin(slot->participants, ","), "]")));
    return;
  }
  std::shared_ptr<Instance> instance = slot;
  if (!instance->payloads.emplace(arrival.process_index, arrival.payload).second) {
    done.Add(std::move(arrive_done),
             absl::AlreadyExistsError(absl::StrCat("barrier '", arrival.barrier_id, "': process ",
                                                   arrival.process_index, " arrived twice")));
    return;
  }
  auto wait = std::make_shared<Wait>(std::move(arrive_done));
  instance->waits.push_back(wait);
  if (instance->payloads.size() == instance->participants.size()) {
    open_.erase(arrival.barrier_id);
    EndLocked(*instance, ResultLocked(*instance), done);
    return;
  }
  const absl::Duration timeout = arrival.timeout;
  wait->timer = timer_->Schedule(absl::Now() + timeout,
                                 [this, instance, timeout] { TimedOut(instance, timeout); });
}

absl::StatusOr<BarrierResult> BarrierTable::ArriveBlocking(const BarrierArrival& arrival) {
  absl::Notification ready;
  absl::StatusOr<BarrierResult> result;
  Arrive(arrival, [&](absl::StatusOr<BarrierResult> r) {
    result = std::move(r);
    ready.Notify();
  });
  ready.WaitForNotification();
  return result;
}

void BarrierTable::TimedOut(const std::shared_ptr<Instance>& instance, absl::Duration timeout) {
  Completions<BarrierResult> done;
  absl::MutexLock lock(&mu_);
  auto it = open_.find(instance->id);
  if (it == open_.end() || it->second != instance) return;  // ended otherwise
  open_.erase(it);
  std::vector<int32_t> missing;
  for (int32_t p : instance->participants) {
    if (!instance->payloads.contains(p)) missing.push_back(p);
  }
  EndLocked(*instance,
            absl::DeadlineExceededError(absl::StrCat(
                "barrier '", instance->id, "': process(es) ", absl::StrJoin(missing, ", "),
                " did not arrive within ", absl::FormatDuration(timeout))),
            done);
}

void BarrierTable::EndLocked(Instance& instance, const absl::StatusOr<BarrierResult>& result,
                             Completions<BarrierResult>& done) {
  for (const std::shared_ptr<Wait>& wait : instance.waits) {
    timer_->Cancel(wait->timer);
    done.Add(wait->Take(), result);
  }
  instance.waits.clear();
}

BarrierResult BarrierTable::ResultLocked(const Instance& instance) {
  BarrierResult r;
  r.participants = instance.participants;
  for (int32_t p : instance.participants) r.payloads.push_back(instance.payloads.at(p));
  r.token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                            absl::Uniform<uint64_t>(bitgen_));
  r.epoch = epoch_;
  if (!instance.sequence_key.empty()) {
    Sequence& seq = sequences_[instance.sequence_key];
    if (seq.epoch != epoch_) {
      seq.epoch = epoch_;
      seq.next = 0;
    }
    r.ticket = seq.next++;
    r.generation = seq.generation;
  }
  return r;
}

void BarrierTable::OnMembershipChange(
    int64_t epoch, const std::vector<std::pair<int32_t, ProcessState>>& gone_now) {
  Completions<BarrierResult> done;
  absl::MutexLock lock(&mu_);
  epoch_ = epoch;
  gone_ = gone_now;
  for (auto it = open_.begin(); it != open_.end();) {
    Instance& instance = *it->second;
    std::vector<std::pair<int32_t, ProcessState>> gone;
    for (const auto& entry : gone_now) {
      if (std::binary_search(instance.participants.begin(), instance.participants.end(),
                             entry.first)) {
        gone.push_back(entry);
      }
    }
    if (gone.empty()) {
      ++it;
      continue;
    }
    EndLocked(
        instance,
        absl::UnavailableError(absl::StrCat("barrier '", it->first, "': ", GoneText(gone, epoch))),
        done);
    it = open_.erase(it);
  }
}

int64_t BarrierTable::ReportFailure(const std::string& sequence_key, int64_t generation) {
  absl::MutexLock lock(&mu_);
  Sequence& seq = sequences_[sequence_key];
  if (seq.generation == generation) ++seq.generation;
  return seq.generation;
}

void BarrierTable::Shutdown() {
  Completions<BarrierResult> done;
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [id, instance] : open_) {
    EndLocked(*instance, absl::UnavailableError("the coordinator is stopping"), done);
  }
  open_.clear();
}

int64_t BarrierTable::open_barriers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(open_.size());
}

}  // namespace placement::server
