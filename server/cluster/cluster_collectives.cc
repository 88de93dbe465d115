#include "server/cluster/cluster_collectives.h"

#include <algorithm>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/cluster/cluster_data.h"
#include "server/cluster/fan_out.h"

namespace placement::server {
namespace {

// "coll/0,1,3": the sequence (ticket) key and cluster-engine set of a
// participant set.
std::string SetKey(const std::vector<int32_t>& participants) {
  return absl::StrCat("coll/", absl::StrJoin(participants, ","));
}

// Result ids every participant derives from the start barrier's token.
std::vector<std::string> IdsFromToken(const std::string& token, size_t n) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < n; ++i) {
    ids.push_back(i == 0 ? absl::StrCat("t-", token)
                         : absl::StrFormat("t-%s%08x", token.substr(0, 24), i));
  }
  return ids;
}

// Whether a done-barrier payload (a part's absl::Status::ToString) is a
// consequence of another part's failure (IsConsequence, fan_out.h).
bool ReportsConsequence(absl::string_view reported) {
  for (absl::StatusCode code : {absl::StatusCode::kUnavailable, absl::StatusCode::kDeadlineExceeded,
                                absl::StatusCode::kCancelled, absl::StatusCode::kAborted}) {
    if (absl::StartsWith(reported, absl::StrCat(absl::StatusCodeToString(code), ":"))) return true;
  }
  return false;
}

using Results = std::vector<std::shared_ptr<const Tensor>>;

}  // namespace

absl::StatusOr<Results> ClusterCollectives::Execute(const CollectiveRequest& request,
                                                    const std::string& tenant,
                                                    const CollectiveContext& context) {
  const bool multi = request.controller == Controller::kMulti;
  absl::StatusOr<Results> tensors = store_->GetMany(request.tensor_ids);
  if (!tensors.ok() || tensors->empty()) return core_->Run(request, context, nullptr);
  bool spans = false;
  std::vector<int32_t> participants;
  for (const auto& t : *tensors) {
    spans |= !t->all_local();
    for (int32_t p : ParticipantsOf(*t)) participants.push_back(p);
  }
  std::sort(participants.begin(), participants.end());
  participants.erase(std::unique(participants.begin(), participants.end()), participants.end());
  // Released before running: DONATE takes an input only when nothing else
  // holds it.
  tensors->clear();
  if (!spans && !multi) return core_->Run(request, context, nullptr);
  if (multi) {
    const std::string key =
        absl::StrCat(tenant, "/", absl::StrJoin(request.tensor_ids, ","), "/", request.KindName());
    return RunMulti(key, participants, request, context);
  }
  return Drive(participants, request, context);
}

std::vector<int32_t> ClusterCollectives::ParticipantsOf(const Tensor& tensor) const {
  std::vector<int32_t> out;
  for (const Shard& s : tensor.shards) out.push_back(s.process_index);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

absl::Status ClusterCollectives::Explain(const absl::Status& status,
                                         const std::vector<int32_t>& participants) const {
  if (status.ok()) return status;
  absl::Status alive = cluster_->CheckAlive(participants);
  if (alive.ok()) return status;
  // Explained already (by a peer, or by a barrier that named the process):
  // said once.
  if (absl::StrContains(status.message(), alive.message())) {
    return absl::UnavailableError(status.message());
  }
  // A closed connection, a timeout, a cancelled call: the loss is the cause.
  if (IsConsequence(status)) return alive;
  return absl::UnavailableError(
      absl::StrCat(alive.message(), "; this daemon's part failed with ", status.ToString()));
}

void ClusterCollectives::Forfeited(const CrossProcessTicket& ticket,
                                   const std::vector<int32_t>& participants,
                                   const absl::Status& status) {
  if (forfeit_) forfeit_(ticket, participants, status);
}

absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> ClusterCollectives::Participate(
    const std::string& op_key, const std::vector<int32_t>& participants,
    const std::vector<std::string>& result_ids, int32_t driver, const std::string& payload,
    const CollectiveRequest& request, const CollectiveContext& base,
    const CrossProcessTicket* given) {
  TensorStore::QuietScope quiet;
  RETURN_IF_ERROR(cluster_->CheckAlive(participants));
  CollectiveContext context = base;
  std::vector<std::string> ids = result_ids;
  std::vector<std::unique_ptr<Tensor>> records;
  auto commit_as = [&](const std::string& token) -> CollectiveCommit {
    return [&, token](std::unique_ptr<Tensor> result,
                      size_t index) -> absl::StatusOr<std::shared_ptr<const Tensor>> {
      if (ids.size() <= index) ids = IdsFromToken(token, index + 1);
      result->id = ids[index];
      std::unique_ptr<Tensor> record = RecordOf(*result);
      std::shared_ptr<const Tensor> view(RecordOf(*result).release());
      RETURN_IF_ERROR(tensors_->AddPending(std::move(result), driver));
      if (records.size() <= index) records.resize(index + 1);
      records[index] = std::move(record);
      return view;
    };
  };
  auto run = [&](const CollectiveCommit& commit) { return core_->Run(request, context, &commit); };
  if (given != nullptr) {
    context.ticket = given;
    absl::StatusOr<Results> ran = run(commit_as(std::string()));
    if (!ran.ok()) {
      Forfeited(*context.ticket, participants, ran.status());
      tensors_->AbortHere(ids);
      return Explain(ran.status(), participants);
    }
    return records;
  }
  BarrierArrival arrival;
  arrival.barrier_id = absl::StrCat(op_key, "/start");
  arrival.process_index = cluster_->process_index();
  arrival.participants = participants;
  arrival.payload = payload;
  arrival.timeout = cluster_->config().op_timeout;
  arrival.sequence_key = SetKey(participants);
  ASSIGN_OR_RETURN(BarrierResult start, cluster_->coordinator()->Barrier(arrival));
  for (size_t i = 0; i < start.payloads.size(); ++i) {
    if (start.payloads[i] != payload) {
      return absl::InvalidArgumentError(
          absl::StrCat("process ", cluster_->process_index(), " and process ",
                       start.participants[i], " asked for different collectives under one call (",
                       op_key, "); every process's trainer must make the same call"));
    }
  }
  CrossProcessTicket ticket;
  ticket.set_key = arrival.sequence_key;
  ticket.epoch = static_cast<uint64_t>(start.epoch);
  ticket.generation = static_cast<uint64_t>(start.generation);
  ticket.ticket = static_cast<uint64_t>(start.ticket);
  context.ticket = &ticket;
  absl::StatusOr<Results> ran = run(commit_as(start.token));
  if (!ran.ok()) {
    Forfeited(ticket, participants, ran.status());
    tensors_->AbortHere(ids);
    return Explain(ran.status(), participants);
  }
  return records;
}

absl::StatusOr<Results> ClusterCollectives::Drive(const std::vector<int32_t>& participants,
                                                  const CollectiveRequest& request,
                                                  const CollectiveContext& context) {
  const size_t num_results = request.tensor_ids.size();
  const std::vector<std::string> donated =
      request.source == SourceHandling::kDonate ? request.tensor_ids : std::vector<std::string>{};
  const std::string op_key = absl::StrCat("sc/", store_->NewId());
  std::vector<std::string> ids;
  for (size_t i = 0; i < num_results; ++i) ids.push_back(store_->NewId());
  // The driver takes the set's next ticket for everyone: one coordinator
  // call instead of every participant meeting.
  RETURN_IF_ERROR(cluster_->CheckAlive(participants));
  BarrierArrival take;
  take.barrier_id = absl::StrCat(op_key, "/ticket");
  take.process_index = cluster_->process_index();
  take.participants = {cluster_->process_index()};
  take.timeout = cluster_->config().op_timeout;
  take.sequence_key = SetKey(participants);
  ASSIGN_OR_RETURN(BarrierResult taken, cluster_->coordinator()->Barrier(take));
  CrossProcessTicket ticket;
  ticket.set_key = take.sequence_key;
  ticket.epoch = static_cast<uint64_t>(taken.epoch);
  ticket.generation = static_cast<uint64_t>(taken.generation);
  ticket.ticket = static_cast<uint64_t>(taken.ticket);
  std::vector<std::vector<std::unique_ptr<Tensor>>> records(participants.size());
  absl::Status ran = FanOut(participants, [&](int32_t p) -> absl::Status {
    const size_t slot =
        std::find(participants.begin(), participants.end(), p) - participants.begin();
    absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> part =
        p == cluster_->process_index()
            ? Participate(op_key, participants, ids, p, "", request, context, &ticket)
            : peers_->PrepareCollective(p, request, op_key, participants, ids, ticket);
    if (!part.ok()) return part.status();
    records[slot] = *std::move(part);
    return absl::OkStatus();
  });
  auto fail = [&](absl::Status status) -> absl::Status {
    tensors_->AbortOn(participants, ids);
    // A donated input may be half consumed: it is gone everywhere.
    if (!donated.empty()) store_->Delete(donated).IgnoreError();
    return Explain(status, participants);
  };
  if (!ran.ok()) return fail(ran);
  std::vector<std::unique_ptr<Tensor>> commit = std::move(records.front());
  if (commit.size() != num_results) {
    return fail(absl::InternalError(
        absl::StrCat("a participant made ", commit.size(), " results, expected ", num_results)));
  }
  std::vector<std::shared_ptr<const Tensor>> committed;
  absl::Status status = tensors_->CommitEverywhere(std::move(commit), donated, &committed);
  if (!status.ok()) return fail(status);
  return committed;
}

absl::StatusOr<Results> ClusterCollectives::RunMulti(const std::string& key,
                                                     const std::vector<int32_t>& participants,
                                                     const CollectiveRequest& request,
                                                     const CollectiveContext& context) {
  const size_t num_results = request.tensor_ids.size();
  const std::vector<std::string> donated =
      request.source == SourceHandling::kDonate ? request.tensor_ids : std::vector<std::string>{};
  const int32_t self = cluster_->process_index();
  if (!std::binary_search(participants.begin(), participants.end(), self)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a multi-controller collective runs on the daemons that hold the tensor's shards "
        "(processes ",
        absl::StrJoin(participants, ", "), "); this is process ", self,
        ": call it without controller MULTI, or on those daemons"));
  }
  int64_t n = 0;
  {
    absl::MutexLock lock(&mu_);
    n = calls_[key]++;
  }
  const std::string op_key = absl::StrCat("mc/", key, "/", n);
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> part =
      Participate(op_key, participants, {}, self, request.Encode(), request, context);
  std::vector<std::string> ids;
  absl::Status here = part.status();
  if (part.ok()) {
    for (const auto& r : *part) ids.push_back(r->id);
    if (part->size() != num_results) {
      here = absl::InternalError(
          absl::StrCat("made ", part->size(), " results, expected ", num_results));
    }
  }
  // This part is committed before the done barrier: once any participant's
  // call returns, every participant's shards of the results are readable
  // (a download right after the call finds them on every daemon). Deleted
  // again below when another part failed.
  if (here.ok()) here = tensors_->CommitHere(*std::move(part), donated);
  // Everyone learns whether everyone succeeded.
  BarrierArrival done;
  done.barrier_id = absl::StrCat(op_key, "/done");
  done.process_index = self;
  done.participants = participants;
  done.payload = here.ok() ? std::string() : std::string(here.ToString());
  done.timeout = cluster_->config().op_timeout;
  absl::StatusOr<BarrierResult> agreed = cluster_->coordinator()->Barrier(done);
  absl::Status failure = !here.ok() ? here : agreed.status();
  // Another process's failure explains this one's when this part only saw
  // its consequence (a closed connection, a timeout).
  if (agreed.ok() && (failure.ok() || IsConsequence(failure))) {
    // The first other failure that is a cause, else the first at all.
    std::optional<size_t> blamed;
    for (size_t i = 0; i < agreed->payloads.size(); ++i) {
      const std::string& reported = agreed->payloads[i];
      if (agreed->participants[i] == self || reported.empty()) continue;
      if (!blamed.has_value()) blamed = i;
      if (!ReportsConsequence(reported)) {
        blamed = i;
        break;
      }
    }
    if (blamed.has_value()) {
      failure = absl::AbortedError(absl::StrCat("process ", agreed->participants[*blamed],
                                                " failed its part: ", agreed->payloads[*blamed]));
    }
  }
  if (!failure.ok()) {
    tensors_->AbortHere(ids);
    tensors_->DeleteHere(ids);
    if (!donated.empty()) tensors_->DeleteHere(donated);
    return Explain(failure, participants);
  }
  std::vector<std::shared_ptr<const Tensor>> committed;
  for (const std::string& id : ids) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> t, store_->Get(id));
    committed.push_back(std::move(t));
  }
  // Records for the daemons without shards: the lowest participant tells them.
  std::vector<const Tensor*> records;
  for (const auto& t : committed) records.push_back(t.get());
  if (self == participants.front()) {
    std::vector<int32_t> others;
    for (int32_t p : cluster_->AlivePeers()) {
      if (!std::binary_search(participants.begin(), participants.end(), p)) others.push_back(p);
    }
    FanOut(others, [&](int32_t p) { return peers_->Commit(p, records, donated); }).IgnoreError();
  }
  return committed;
}

}  // namespace placement::server
