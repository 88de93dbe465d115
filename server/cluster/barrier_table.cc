#include "server/cluster/barrier_table.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace placement::server {

absl::StatusOr<BarrierResult> BarrierTable::Arrive(const BarrierArrival& arrival) {
  if (arrival.barrier_id.empty() || arrival.barrier_id.size() > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("barrier_id is ", arrival.barrier_id.size(), " bytes; ids are 1..1024 bytes"));
  }
  if (arrival.payload.size() > kMaxPayloadBytes) {
    return absl::InvalidArgumentError(absl::StrCat("barrier payload is ", arrival.payload.size(),
                                                   " bytes; at most ", kMaxPayloadBytes));
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
  absl::MutexLock lock(&mu_);
  if (stopping_) return absl::UnavailableError("the coordinator is stopping");
  for (int32_t p : arrival.participants) {
    if (std::find(lost_.begin(), lost_.end(), p) != lost_.end()) {
      return absl::UnavailableError(absl::StrCat("barrier '", arrival.barrier_id, "': process ", p,
                                                 " has left the cluster (epoch ", epoch_, ")"));
    }
  }
  std::shared_ptr<Instance>& slot = open_[arrival.barrier_id];
  if (slot == nullptr) {
    if (open_.size() > kMaxOpenBarriers) {
      open_.erase(arrival.barrier_id);
      return absl::ResourceExhaustedError(
          absl::StrCat(kMaxOpenBarriers, " barriers are open; their participants never arrived"));
    }
    slot = std::make_shared<Instance>();
    slot->participants = arrival.participants;
    slot->sequence_key = arrival.sequence_key;
  } else if (slot->participants != arrival.participants) {
    return absl::InvalidArgumentError(absl::StrCat(
        "barrier '", arrival.barrier_id, "': process ", arrival.process_index,
        " names participants [", absl::StrJoin(arrival.participants, ","),
        "] but the first arrival named [", absl::StrJoin(slot->participants, ","), "]"));
  }
  std::shared_ptr<Instance> instance = slot;
  if (!instance->payloads.emplace(arrival.process_index, arrival.payload).second) {
    return absl::AlreadyExistsError(absl::StrCat("barrier '", arrival.barrier_id, "': process ",
                                                 arrival.process_index, " arrived twice"));
  }
  if (instance->payloads.size() == instance->participants.size()) {
    CompleteLocked(instance.get());
    open_.erase(arrival.barrier_id);
  }
  auto done = [&instance]() { return instance->done; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&done), arrival.timeout)) {
    std::vector<int32_t> missing;
    for (int32_t p : instance->participants) {
      if (!instance->payloads.contains(p)) missing.push_back(p);
    }
    instance->done = true;
    instance->status = absl::DeadlineExceededError(absl::StrCat(
        "barrier '", arrival.barrier_id, "': process(es) ", absl::StrJoin(missing, ", "),
        " did not arrive within ", absl::FormatDuration(arrival.timeout)));
    auto it = open_.find(arrival.barrier_id);
    if (it != open_.end() && it->second == instance) open_.erase(it);
  }
  if (!instance->status.ok()) return instance->status;
  return instance->result;
}

void BarrierTable::CompleteLocked(Instance* instance) {
  BarrierResult& r = instance->result;
  r.participants = instance->participants;
  for (int32_t p : instance->participants) r.payloads.push_back(instance->payloads[p]);
  r.token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                            absl::Uniform<uint64_t>(bitgen_));
  r.epoch = epoch_;
  if (!instance->sequence_key.empty()) {
    Sequence& seq = sequences_[instance->sequence_key];
    if (seq.epoch != epoch_) {
      seq.epoch = epoch_;
      seq.next = 0;
    }
    r.ticket = seq.next++;
    r.generation = seq.generation;
  }
  instance->done = true;
}

void BarrierTable::OnMembershipChange(int64_t epoch, const std::vector<int32_t>& lost) {
  absl::MutexLock lock(&mu_);
  epoch_ = epoch;
  lost_ = lost;
  for (auto it = open_.begin(); it != open_.end();) {
    Instance& instance = *it->second;
    std::vector<int32_t> gone;
    for (int32_t p : lost) {
      if (std::binary_search(instance.participants.begin(), instance.participants.end(), p)) {
        gone.push_back(p);
      }
    }
    if (gone.empty()) {
      ++it;
      continue;
    }
    instance.done = true;
    instance.status = absl::UnavailableError(
        absl::StrCat("barrier '", it->first, "': ", gone.size() == 1 ? "process " : "processes ",
                     absl::StrJoin(gone, ", "), " left the cluster (epoch ", epoch, ")"));
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
  absl::MutexLock lock(&mu_);
  stopping_ = true;
  for (auto& [id, instance] : open_) {
    instance->done = true;
    instance->status = absl::UnavailableError("the coordinator is stopping");
  }
  open_.clear();
}

int64_t BarrierTable::open_barriers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(open_.size());
}

}  // namespace placement::server
