#include "server/cluster/cluster_collectives.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "server/cluster/cluster_data.h"
#include "server/cluster/fan_out.h"

namespace placement::server {
namespace {

// "coll/0,1,3/d2": the cluster-engine set of single-controller calls that
// `driver` drives on a participant set. Each driver numbers its own calls
// (its transport groups are its own), so no coordinator ticket is needed.
std::string DriverSetKey(int32_t driver, const std::vector<int32_t>& participants) {
  return absl::StrCat("coll/", absl::StrJoin(participants, ","), "/d", driver);
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

// FNV-1a, 64 bits, from `seed`: stable across processes and builds (the
// daemons of a set must compute the same digests and ids).
uint64_t Fnv1a(absl::string_view bytes, uint64_t seed) {
  uint64_t h = seed;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}
constexpr uint64_t kSeedA = 0xcbf29ce484222325ULL;
constexpr uint64_t kSeedB = 0x84222325cbf29ce4ULL;

// 16 bytes that differ for requests that encode differently (accidentally:
// the daemons trust each other).
std::string RequestDigest(const std::string& encoded) {
  const uint64_t a = Fnv1a(encoded, kSeedA), b = Fnv1a(encoded, kSeedB);
  std::string digest(16, '\0');
  for (int i = 0; i < 8; ++i) {
    digest[i] = static_cast<char>((a >> (8 * i)) & 0xff);
    digest[8 + i] = static_cast<char>((b >> (8 * i)) & 0xff);
  }
  return digest;
}

// "mc/0,1" (or "mc/0,1/t<hash>" for a named tenant): the key of a
// multi-controller set, its coordinator sequence and its transport groups.
// Tenants are numbered apart: one job's call order says nothing of
// another's.
std::string MultiSetKey(const std::string& tenant, const std::vector<int32_t>& participants) {
  std::string key = absl::StrCat("mc/", absl::StrJoin(participants, ","));
  if (!tenant.empty()) absl::StrAppendFormat(&key, "/t%016x", Fnv1a(tenant, kSeedA));
  return key;
}

// The token of the n-th call of a formation whose barrier gave `token`:
// unguessable (the formation's token is random) and the same everywhere.
std::string CallToken(const std::string& token, uint64_t n) {
  const std::string what = absl::StrCat(token, "/", n);
  return absl::StrFormat("%016x%016x", Fnv1a(what, kSeedA), Fnv1a(what, kSeedB));
}

// Whether a spanning group of the call is not exactly `participants`
// (ascending) -- it reaches several processes but not all of them -- or no
// group spans at all. Such a call's forfeit might not reach every
// participant through its groups (CrossProcessTicket::partial_groups).
bool PartialGroups(const std::vector<std::vector<int64_t>>& groups,
                   const std::vector<int32_t>& participants, const Cluster& cluster) {
  if (participants.size() < 2) return false;
  bool spans = false;
  for (const std::vector<int64_t>& group : groups) {
    std::vector<int32_t> processes;
    processes.reserve(group.size());
    for (int64_t device : group) processes.push_back(cluster.ProcessOf(device));
    std::sort(processes.begin(), processes.end());
    processes.erase(std::unique(processes.begin(), processes.end()), processes.end());
    if (processes.size() < 2) continue;
    if (processes != participants) return true;
    spans = true;
  }
  return !spans;
}

using Results = std::vector<std::shared_ptr<const Tensor>>;

// The inputs a call consumes: all of them when it donates, else none.
std::vector<std::string> DonatedIds(const CollectiveRequest& request) {
  return request.source == SourceHandling::kDonate ? request.tensor_ids
                                                   : std::vector<std::string>{};
}

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
  if (multi) return RunMulti(tenant, participants, request, context);
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
    const std::vector<int32_t>& participants, const std::vector<std::string>& result_ids,
    int32_t driver, const CollectiveRequest& request, const CollectiveContext& base,
    const CrossProcessTicket& ticket) {
  TensorStore::QuietScope quiet;
  CollectiveContext context = base;
  context.ticket = &ticket;
  const std::vector<std::string>& ids = result_ids;
  std::vector<std::unique_ptr<Tensor>> records;
  const CollectiveCommit commit =
      [&](std::unique_ptr<Tensor> result,
          size_t index) -> absl::StatusOr<std::shared_ptr<const Tensor>> {
    if (ids.size() <= index) {
      return absl::InternalError(
          absl::StrCat("result ", index, " of a call with ", ids.size(), " result ids"));
    }
    result->id = ids[index];
    std::unique_ptr<Tensor> record = RecordOf(*result);
    std::shared_ptr<const Tensor> view(RecordOf(*result).release());
    RETURN_IF_ERROR(tensors_->AddPending(std::move(result), driver));
    if (records.size() <= index) records.resize(index + 1);
    records[index] = std::move(record);
    return view;
  };
  // A ticket of a newer epoch than this daemon has taken in (its view, and
  // the listeners that retire old groups): the driver heard of a rejoin or
  // a loss first. Judged on the older view, a rejoined
  // participant would count as lost, and this part's refusal would leave
  // the others waiting out their budget for its rendezvous. Bounded well
  // inside that budget (op_timeout): one asked-for beat normally settles it.
  const ClusterConfig& config = cluster_->config();
  cluster_->AwaitEpoch(
      static_cast<int64_t>(ticket.epoch),
      std::min(context.deadline,
               absl::Now() + std::min(config.op_timeout / 2, config.detection_bound())));
  absl::Status alive = cluster_->CheckAlive(participants);
  // A coordinator-issued ticket a lost participant will never run needs no
  // forfeit; a call-ordered one still settles.
  if (!alive.ok() && !ticket.call_ordered) return alive;
  absl::StatusOr<Results> ran = alive.ok() ? core_->Run(request, context, &commit) : alive;
  if (!ran.ok()) {
    if (!ticket.call_ordered) Forfeited(ticket, participants, ran.status());
    tensors_->AbortHere(ids);
    return Explain(ran.status(), participants);
  }
  if (InstallsAtOnce(participants, driver)) {
    // Presumed commit: a driver that takes part commits its own part only
    // once every part succeeded, so a result installed here is either
    // returned to its caller or aborted (AbortForDriver deletes it).
    std::vector<std::unique_ptr<Tensor>> installing;
    for (const auto& record : records) installing.push_back(RecordOf(*record));
    const std::vector<std::string> donated = DonatedIds(request);
    absl::Status installed = tensors_->CommitHere(std::move(installing), donated);
    if (!installed.ok()) {
      tensors_->AbortHere(ids);
      return installed;
    }
  }
  return records;
}

bool ClusterCollectives::InstallsAtOnce(const std::vector<int32_t>& participants,
                                        int32_t driver) const {
  return driver != cluster_->process_index() &&
         std::binary_search(participants.begin(), participants.end(), driver);
}

absl::StatusOr<Results> ClusterCollectives::Drive(const std::vector<int32_t>& participants,
                                                  const CollectiveRequest& request,
                                                  const CollectiveContext& context) {
  const size_t num_results = request.tensor_ids.size();
  const std::vector<std::string> donated = DonatedIds(request);
  const std::string op_key = absl::StrCat("sc/", store_->NewId());
  std::vector<std::string> ids;
  for (size_t i = 0; i < num_results; ++i) ids.push_back(store_->NewId());
  // The driver numbers the call in its own sequence for the set: no
  // coordinator round trip.
  RETURN_IF_ERROR(cluster_->CheckAlive(participants));
  const CrossProcessTicket ticket = NextDriverTicket(participants);
  // Every participant's part at once: the peers' through asynchronous
  // Prepare calls, this daemon's on this thread meanwhile.
  std::vector<std::vector<std::unique_ptr<Tensor>>> records(participants.size());
  const int32_t self = cluster_->process_index();
  auto slot_of = [&](int32_t p) {
    return static_cast<size_t>(std::find(participants.begin(), participants.end(), p) -
                               participants.begin());
  };
  // Asynchronous calls (FanOutAsync): a driver of many daemons holds no
  // thread per peer.
  const absl::Status ran = FanOutAsync(
      participants,
      [&](int32_t p, PeerTransport::Done done) {
        const size_t slot = slot_of(p);
        return peers_->StartPrepareCollective(
            p, request, op_key, participants, ids, ticket,
            [&records, slot,
             done = std::move(done)](absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> part) {
              if (part.ok()) records[slot] = *std::move(part);
              done(part.status());
            });
      },
      self,
      [&]() -> absl::Status {
        absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> part =
            Participate(participants, ids, self, request, context, ticket);
        if (!part.ok()) return part.status();
        records[slot_of(self)] = *std::move(part);
        return absl::OkStatus();
      });
  auto fail = [&](absl::Status status, bool committing = false) -> absl::Status {
    DriverTicketFailed(ticket);
    tensors_->AbortOn(participants, ids);
    // A donated input may be half consumed (this daemon's part, say, took
    // its shards quietly while another part failed): it goes everywhere.
    // So do results a commit that failed elsewhere installed here and on
    // the daemons without shards.
    std::vector<std::string> gone = donated;
    if (committing) gone.insert(gone.end(), ids.begin(), ids.end());
    tensors_->DeleteEverywhere(gone);
    return Explain(status, participants);
  };
  if (!ran.ok()) return fail(ran);
  std::vector<std::unique_ptr<Tensor>> commit = std::move(records.front());
  if (commit.size() != num_results) {
    return fail(absl::InternalError(
        absl::StrCat("a participant made ", commit.size(), " results, expected ", num_results)));
  }
  // The other participants installed their results (and deleted the
  // donated inputs) when their parts ended (InstallsAtOnce): the records go
  // only to the daemons without shards -- none when the call spans them all.
  std::vector<int32_t> installed;
  if (std::binary_search(participants.begin(), participants.end(), self)) {
    for (int32_t p : participants) {
      if (p != self) installed.push_back(p);
    }
  }
  std::vector<std::shared_ptr<const Tensor>> committed;
  absl::Status status =
      tensors_->CommitEverywhere(std::move(commit), donated, &committed, installed);
  if (!status.ok()) return fail(status, /*committing=*/true);
  return committed;
}

CrossProcessTicket ClusterCollectives::NextDriverTicket(const std::vector<int32_t>& participants) {
  CrossProcessTicket ticket;
  ticket.set_key = DriverSetKey(cluster_->process_index(), participants);
  absl::MutexLock lock(&mu_);
  // Read under the lock and never backwards: two calls that saw different
  // epochs must not both restart the numbering.
  const uint64_t epoch = static_cast<uint64_t>(cluster_->epoch());
  DriverSequence& sequence = driver_sequences_[ticket.set_key];
  if (epoch > sequence.epoch) {
    // A new epoch starts new sequences and transport groups everywhere.
    sequence.epoch = epoch;
    sequence.next = 0;
  }
  ticket.epoch = sequence.epoch;
  ticket.generation = sequence.generation;
  ticket.ticket = sequence.next++;
  return ticket;
}

void ClusterCollectives::DriverTicketFailed(const CrossProcessTicket& ticket) {
  absl::MutexLock lock(&mu_);
  DriverSequence& sequence = driver_sequences_[ticket.set_key];
  // The set's groups of that generation may be broken or out of step: the
  // next call names fresh ones (once, whichever failed call comes first).
  if (sequence.epoch == ticket.epoch && sequence.generation == ticket.generation) {
    ++sequence.generation;
  }
}

absl::StatusOr<Results> ClusterCollectives::RunMulti(const std::string& tenant,
                                                     const std::vector<int32_t>& participants,
                                                     const CollectiveRequest& request,
                                                     const CollectiveContext& context) {
  const size_t num_results = request.tensor_ids.size();
  const std::vector<std::string> donated = DonatedIds(request);
  const int32_t self = cluster_->process_index();
  if (!std::binary_search(participants.begin(), participants.end(), self)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "a multi-controller collective runs on the daemons that hold the tensor's shards "
        "(processes ",
        absl::StrJoin(participants, ", "), "); this is process ", self,
        ": call it without controller MULTI, or on those daemons"));
  }
  const std::string set_key = MultiSetKey(tenant, participants);
  absl::StatusOr<MultiCall> call = Number(set_key, participants, request);
  if (!call.ok()) return Explain(call.status(), participants);
  const std::vector<std::string>& ids = call->result_ids;
  // From here on the call is numbered: it ends in Settle whatever happens,
  // and peers' reads of its results wait until then.
  {
    absl::MutexLock lock(&mu_);
    in_flight_.insert(ids.begin(), ids.end());
  }
  absl::Cleanup settled = [&] {
    absl::MutexLock lock(&mu_);
    for (const std::string& id : ids) in_flight_.erase(id);
    settled_.SignalAll();
  };
  absl::StatusOr<std::vector<std::unique_ptr<Tensor>>> part =
      Participate(participants, ids, self, request, context, call->ticket);
  absl::Status here = part.status();
  if (part.ok() && part->size() != num_results) {
    here = absl::InternalError(
        absl::StrCat("made ", part->size(), " results, expected ", num_results));
  }
  if (here.ok()) here = tensors_->CommitHere(*std::move(part), donated);
  bool late = false;
  absl::Status failure = settle_ ? settle_(call->ticket, here, &late) : here;
  if (!failure.ok()) {
    // The set forms again at its next call -- unless this part failed after
    // the others may have finished: then every daemon fails that next call
    // (ClusterEngine::Settle), and forms again at the one after, together.
    if (!late) {
      absl::MutexLock lock(&mu_);
      auto it = sets_.find(set_key);
      if (it != sets_.end()) it->second->stale = true;
    }
    tensors_->AbortHere(ids);
    tensors_->DeleteHere(ids);
    // Consumed: every participant deletes its own part; the lowest also
    // tells the daemons without shards, which hold the input's record.
    tensors_->DeleteHere(donated);
    if (self == participants.front()) {
      tensors_->DeleteOnPeers(donated, NonParticipants(participants));
    }
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
    FanOutCall(peers_, NonParticipants(participants), &PeerTransport::StartCommit)(records, donated)
        .IgnoreError();
  }
  return committed;
}

std::vector<int32_t> ClusterCollectives::NonParticipants(
    const std::vector<int32_t>& participants) const {
  std::vector<int32_t> others;
  for (int32_t p : cluster_->AlivePeers()) {
    if (!std::binary_search(participants.begin(), participants.end(), p)) others.push_back(p);
  }
  return others;
}

absl::StatusOr<ClusterCollectives::MultiCall> ClusterCollectives::Number(
    const std::string& set_key, const std::vector<int32_t>& participants,
    const CollectiveRequest& request) {
  std::shared_ptr<MultiSet> set;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<MultiSet>& slot = sets_[set_key];
    if (slot == nullptr) slot = std::make_shared<MultiSet>(participants);
    set = slot;
  }
  const std::string encoded = request.Encode();
  // From the request and the inputs' records, the same on every
  // participant. A request that cannot be planned fails in every part
  // before its items: the round says so. Checked calls
  // (--cluster_check_collectives) have the round anyway and skip the
  // planning.
  bool partial = false;
  if (!cluster_->config().check_collectives) {
    absl::StatusOr<std::vector<std::vector<int64_t>>> groups = core_->DeviceGroups(request);
    partial = !groups.ok() || PartialGroups(*groups, participants, *cluster_);
  }
  absl::MutexLock lock(&set->mu);
  if (!set->formed || set->stale) RETURN_IF_ERROR(Form(*set, set_key, encoded));
  MultiCall call;
  call.ticket.set_key = set_key;
  call.ticket.epoch = set->epoch;
  call.ticket.generation = set->generation;
  call.ticket.ticket = set->next++;
  call.ticket.call_ordered = true;
  call.ticket.digest = RequestDigest(encoded);
  call.ticket.processes = participants;
  call.ticket.partial_groups = partial;
  call.result_ids =
      IdsFromToken(CallToken(set->token, call.ticket.ticket), request.tensor_ids.size());
  return call;
}

absl::Status ClusterCollectives::Form(MultiSet& set, const std::string& set_key,
                                      const std::string& encoded) {
  RETURN_IF_ERROR(cluster_->CheckAlive(set.participants));
  if (set.formed) {
    // Every formation after the first names fresh transport groups: the old
    // ones may be broken or out of step (a bump the others already made
    // counts once).
    cluster_->coordinator()
        ->ReportContextFailure(set_key, static_cast<int64_t>(set.generation), "the set forms again")
        .IgnoreError();
  }
  // Cleared before meeting: a membership change from now on forms it again.
  set.stale = false;
  BarrierArrival arrival;
  arrival.barrier_id = absl::StrCat("mcs/", set_key, "/form");
  arrival.process_index = cluster_->process_index();
  arrival.participants = set.participants;
  // The first call, and whether this daemon checks calls: daemons that
  // differ there would each wait for the other's kind of round.
  const bool check = cluster_->config().check_collectives;
  constexpr absl::string_view kChecked = "checked|", kUnchecked = "unchecked|";
  const std::string payload = absl::StrCat(check ? kChecked : kUnchecked, encoded);
  arrival.payload = payload;
  arrival.timeout = cluster_->config().op_timeout;
  arrival.sequence_key = set_key;
  absl::StatusOr<BarrierResult> formed = cluster_->coordinator()->Barrier(arrival);
  if (!formed.ok()) {
    set.stale = true;
    return formed.status();
  }
  set.formed = true;
  set.epoch = static_cast<uint64_t>(formed->epoch);
  set.generation = static_cast<uint64_t>(formed->generation);
  set.token = formed->token;
  set.next = 0;
  for (size_t i = 0; i < formed->payloads.size(); ++i) {
    const std::string& theirs = formed->payloads[i];
    if (absl::StartsWith(theirs, check ? kUnchecked : kChecked)) {
      set.stale = true;  // every call forms (and fails) again until they agree
      return absl::InvalidArgumentError(
          absl::StrCat("process ", cluster_->process_index(),
                       " runs with --cluster_check_collectives=", check ? "true" : "false",
                       " and process ", formed->participants[i], " with ", check ? "false" : "true",
                       " (set ", set_key, "); every daemon of a cluster needs the same setting"));
    }
    if (theirs != payload) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process ", cluster_->process_index(), " and process ", formed->participants[i],
          " asked for different collectives as the first call of set ", set_key,
          "; every process's trainer must issue a set's multi-controller collectives in the "
          "same order, with the same arguments"));
    }
  }
  return absl::OkStatus();
}

bool ClusterCollectives::AwaitSettled(const std::string& tensor_id, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (in_flight_.contains(tensor_id)) {
    if (absl::Now() >= deadline || settled_.WaitWithDeadline(&mu_, deadline)) {
      return !in_flight_.contains(tensor_id);
    }
  }
  return true;
}

void ClusterCollectives::OnClusterEvent(const ClusterEvent& event) {
  const bool all = event.self_lost || event.coordinator_lost ||
                   (event.before != nullptr && event.after != nullptr &&
                    event.before->coordinator_instance_id != event.after->coordinator_instance_id);
  std::vector<int32_t> touched = event.lost;
  touched.insert(touched.end(), event.rejoined.begin(), event.rejoined.end());
  absl::MutexLock lock(&mu_);
  for (auto& [key, set] : sets_) {
    bool hit = all;
    for (int32_t p : touched) {
      hit |= std::binary_search(set->participants.begin(), set->participants.end(), p);
    }
    if (hit) set->stale = true;
  }
}

}  // namespace placement::server
