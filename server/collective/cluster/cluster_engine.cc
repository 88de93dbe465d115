#include "server/collective/cluster/cluster_engine.h"

#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/logging.h"

namespace placement::server {
namespace {

// The transport tag of the `ordinal`-th item of a ticket on one subset's context:
// the same on every process of the subset (each lists the subset's items in
// the same relative order, whatever else it lists), and different for
// consecutive tickets, so processes that disagree on the ticket time out
// instead of exchanging each other's bytes.
// Never kAgreementTag.
uint32_t ItemTag(uint64_t ticket, uint32_t ordinal) {
  return static_cast<uint32_t>((ticket % 0x3fffff) * 1024 + ordinal % 1024);
}

// The tag of the agreement rounds of call-ordered tickets: the same for
// every call, so processes whose numbering went out of step still meet and
// learn it (a tag from the number would leave them waiting apart).
constexpr uint32_t kAgreementTag = 0xffffffff;

// The tag base of a call-ordered ticket: its number mixed with its request
// digest, so processes that asked for different calls as the same number
// never match each other's operations.
uint64_t OrderedTagBase(const CrossProcessTicket& t) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : t.digest) h = (h ^ c) * 0x100000001b3ULL;
  return t.ticket + (h % 0x3fffff);
}

// Where a call-ordered part that fails first leaves its notice: one key per
// formation (set, epoch, generation), which forms again after it.
std::string ForfeitPrefix(const std::string& set_key, uint64_t epoch, uint64_t generation) {
  return absl::StrCat("forfeit/", set_key, "/e", epoch, "/g", generation, "/");
}

// What an unchecked call that timed out (or saw its peer give up) adds for
// its caller: Run appends it, Settle leaves it out of what the others read.
std::string UncheckedHint(const CrossProcessTicket& t) {
  return absl::StrCat("; call ", t.ticket, " of set ", t.set_key,
                      " ran unchecked: trainers that issue a set's collectives in different "
                      "orders or with different arguments wait like this "
                      "(--cluster_check_collectives names them)");
}

std::string ForfeitKey(const CrossProcessTicket& t) {
  return absl::StrCat(ForfeitPrefix(t.set_key, t.epoch, t.generation), "notice");
}

std::string TicketName(const CrossProcessTicket& t) {
  return absl::StrCat("set ", t.set_key, ", epoch ", t.epoch, ", generation ", t.generation,
                      ", ticket ", t.ticket);
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClusterEngine>> ClusterEngine::Create(ClusterEngineOptions options) {
  if (options.local == nullptr || !options.process_of) {
    return absl::InvalidArgumentError("cluster engine: local engine and process_of are required");
  }
  if (options.process_index < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cluster engine: process index ", options.process_index, " is negative"));
  }
  if (options.timeout <= absl::ZeroDuration() || options.gap_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cluster engine: timeout must be positive and gap_timeout not negative, got ",
        absl::FormatDuration(options.timeout), " and ", absl::FormatDuration(options.gap_timeout)));
  }
  return std::unique_ptr<ClusterEngine>(new ClusterEngine(std::move(options)));
}

ClusterEngine::~ClusterEngine() {
  absl::MutexLock lock(&mu_);
  for (auto& [key, sequencer] : sequencers_) sequencer->Close();
  for (auto& [key, formation] : formations_) formation.sequencer->Close();
}

absl::Status ClusterEngine::Run(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                const CollectiveContext& context) {
  const CrossProcessTicket* ticket = context.ticket;
  if (ticket == nullptr) {
    // Only all-local items can run without a ticket; the local engine checks
    // them (its messages index `items` as given).
    for (size_t i = 0; i < items.size(); ++i) {
      for (int64_t device : items[i].group) {
        if (options_.process_of(device) != options_.process_index) {
          return absl::FailedPreconditionError(
              absl::StrCat(CollectiveKindName(kind), " item ", i, ": rank device ", device,
                           " is on process ", options_.process_of(device),
                           "; a call spanning processes needs a CrossProcessTicket"));
        }
      }
    }
    return options_.local->Run(kind, items, context);
  }
  RetireAbandoned(*ticket);
  if (ticket->call_ordered) return RunOrdered(kind, items, context);
  absl::StatusOr<std::shared_ptr<TicketSequencer>> sequencer = SequencerFor(*ticket);
  if (!sequencer.ok()) return sequencer.status();
  std::vector<ClusterItemPlan> plans;
  plans.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    absl::StatusOr<ClusterItemPlan> plan =
        PlanClusterItem(kind, items[i], options_.process_index, options_.process_of,
                        absl::StrCat(CollectiveKindName(kind), " item ", i));
    if (!plan.ok()) {
      // This process will not run the ticket: its successors need not wait.
      (*sequencer)->Abandon(ticket->ticket);
      return plan.status();
    }
    plans.push_back(*std::move(plan));
  }
  if (absl::Status s = (*sequencer)->Acquire(ticket->ticket, context); !s.ok()) return s;
  absl::Status status = RunInTurn(kind, items, plans, context);
  (*sequencer)->Finish(ticket->ticket);
  return status;
}

absl::Status ClusterEngine::RunOrdered(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                       const CollectiveContext& context) {
  const CrossProcessTicket& ticket = *context.ticket;
  ASSIGN_OR_RETURN(std::shared_ptr<TicketSequencer> sequencer, SequencerFor(ticket));
  // An invalid item is told to the others in the first round.
  absl::Status mine = absl::OkStatus();
  std::vector<ClusterItemPlan> plans;
  plans.reserve(items.size());
  for (size_t i = 0; i < items.size() && mine.ok(); ++i) {
    absl::StatusOr<ClusterItemPlan> plan =
        PlanClusterItem(kind, items[i], options_.process_index, options_.process_of,
                        absl::StrCat(CollectiveKindName(kind), " item ", i));
    if (plan.ok()) {
      plans.push_back(*std::move(plan));
    } else {
      mine = plan.status();
    }
  }
  // The turn is waited for whatever the call's cancellation says: the
  // others count on this process's words in it (Settle).
  CollectiveContext turn;
  turn.deadline = absl::Now() + options_.timeout;
  RETURN_IF_ERROR(sequencer->Acquire(ticket.ticket, turn));
  if (mine.ok()) mine = context.Check();
  if (Checked(ticket)) {
    RETURN_IF_ERROR(Agree(ticket, mine));
  } else {
    // The previous call's late failure, or this part's own: nobody runs
    // the items.
    const absl::Status late = TakeLate(ticket.set_key);
    if (!mine.ok() || !late.ok()) {
      const absl::Status why = mine.ok() ? late : mine;
      ForfeitOrdered(ticket, why);
      return why;
    }
  }
  {
    absl::MutexLock lock(&mu_);
    formations_[ticket.set_key].passed = ticket.ticket;
  }
  const uint64_t aborts = AbortsOf(ticket.processes);
  absl::Status status = RunInTurn(kind, items, plans, context);
  if (status.ok() || Checked(ticket) || AbortsOf(ticket.processes) != aborts) return status;
  // Another part gave the call up (before its items, or its own items
  // failed just before): that is the cause, and its next call fails too,
  // so this failure is not late. Such a part leaves its notice as its
  // connections close; a short wait covers the gap.
  std::optional<absl::Status> cause =
      ForfeitedBy(ticket, std::min(options_.timeout, absl::Seconds(2)));
  if (!cause.has_value()) {
    // This part's own failure in its items: the others' next call fails
    // (Settle marks this one late); tell them now, before they look.
    CrossProcessTicket next = ticket;
    ++next.ticket;
    PostNotice(next, absl::Status(status.code(),
                                  absl::StrCat("its part of call ", ticket.ticket, " of set ",
                                               ticket.set_key,
                                               " failed in the collective: ", status.message())));
    // Unchecked calls that differ never exchange bytes: the first daemon to
    // give up times out, the others see it close its connections. Only
    // this caller is told (the notice and Settle's late word carry the
    // plain status).
    if (absl::IsDeadlineExceeded(status) || absl::IsUnavailable(status)) {
      return absl::Status(status.code(), absl::StrCat(status.message(), UncheckedHint(ticket)));
    }
    return status;
  }
  absl::MutexLock lock(&mu_);
  formations_[ticket.set_key].passed.reset();
  return *cause;
}

absl::Status ClusterEngine::RefuseLost(const TransportGroupKey& key, absl::string_view what) {
  absl::MutexLock lock(&aborts_mu_);
  for (int32_t p : key.processes) {
    auto it = lost_.find(p);
    if (it != lost_.end() && it->second.epoch >= key.epoch) {
      return absl::UnavailableError(absl::StrCat("the group over processes ",
                                                 ProcessListKey(key.processes), " (", what,
                                                 "): ", it->second.why));
    }
  }
  return absl::OkStatus();
}

uint64_t ClusterEngine::AbortsOf(const std::vector<int32_t>& processes) {
  absl::MutexLock lock(&aborts_mu_);
  uint64_t n = 0;
  for (int32_t p : processes) {
    auto it = aborts_.find(p);
    if (it != aborts_.end()) n += it->second;
  }
  return n;
}

void ClusterEngine::PostNotice(const CrossProcessTicket& ticket, const absl::Status& why) {
  if (options_.store == nullptr || ticket.processes.size() < 2) return;
  CallWord word;
  word.call = ticket.ticket;
  word.digest = ticket.digest;
  word.status = why;
  absl::Status posted =
      options_.store->Set(ForfeitKey(ticket), EncodeForfeit(options_.process_index, word));
  if (!posted.ok()) {
    LogWarning("cluster collective (", TicketName(ticket),
               "): could not leave the forfeit notice: ", posted.message());
  }
}

absl::Status ClusterEngine::TakeLate(const std::string& set_key) {
  absl::MutexLock lock(&mu_);
  absl::Status late = std::move(formations_[set_key].late);
  formations_[set_key].late = absl::OkStatus();
  return late;
}

void ClusterEngine::ForfeitOrdered(const CrossProcessTicket& ticket, const absl::Status& why) {
  if (ticket.processes.size() < 2) return;
  PostNotice(ticket, why);
  CloseForfeited(ticket, why);
}

std::optional<absl::Status> ClusterEngine::ForfeitedBy(const CrossProcessTicket& ticket,
                                                       absl::Duration wait) {
  if (options_.store == nullptr) return std::nullopt;
  absl::StatusOr<std::string> notice = options_.store->Get(ForfeitKey(ticket), wait);
  if (!notice.ok()) return std::nullopt;
  absl::StatusOr<std::pair<int32_t, CallWord>> decoded = DecodeForfeit(*notice);
  if (!decoded.ok() || decoded->first == options_.process_index ||
      decoded->second.call != ticket.ticket) {
    return std::nullopt;
  }
  return PartFailedError(decoded->first, decoded->second.status);
}

absl::Status ClusterEngine::Agree(const CrossProcessTicket& ticket, const absl::Status& mine) {
  const auto self =
      std::lower_bound(ticket.processes.begin(), ticket.processes.end(), options_.process_index);
  if (self == ticket.processes.end() || *self != options_.process_index) {
    return mine.ok() ? absl::InternalError(absl::StrCat("call-ordered ", TicketName(ticket),
                                                        " does not list process ",
                                                        options_.process_index))
                     : mine;
  }
  if (ticket.processes.size() < 2) return mine;
  if (options_.transport == nullptr) {
    return mine.ok() ? absl::FailedPreconditionError(absl::StrCat(
                           "collective over processes ", ProcessListKey(ticket.processes),
                           " but this build has no cross-process transport"))
                     : mine;
  }
  CallWord word;
  word.call = ticket.ticket;
  word.digest = ticket.digest;
  word.status = mine;
  {
    // This process's last call failed after its round: this call fails
    // everywhere, naming it (told once).
    absl::MutexLock lock(&mu_);
    absl::Status& late = formations_[ticket.set_key].late;
    if (!late.ok()) {
      if (word.status.ok()) word.status = late;
      late = absl::OkStatus();
    }
  }
  const absl::Status& said = word.status;
  const TransportGroupKey key{ticket.epoch, ticket.set_key, ticket.generation, ticket.processes};
  const std::string what = absl::StrCat("agreement before the items, ", TicketName(ticket));
  absl::StatusOr<std::vector<std::string>> blocks;
  if (absl::Status refused = RefuseLost(key, what); !refused.ok()) {
    blocks = refused;
  } else {
    blocks = options_.transport->Exchange(key, EncodeCallWord(word), kAgreementTag,
                                          options_.timeout, what);
  }
  if (!blocks.ok()) {
    ReportFailure(ticket, blocks.status());
    return said.ok() ? blocks.status() : said;
  }
  std::vector<CallWord> words;
  words.reserve(blocks->size());
  for (const std::string& block : *blocks) {
    absl::StatusOr<CallWord> decoded = DecodeCallWord(block);
    if (!decoded.ok()) return said.ok() ? decoded.status() : said;
    words.push_back(*std::move(decoded));
  }
  return JudgeRound(ticket.processes, static_cast<size_t>(self - ticket.processes.begin()), words,
                    absl::StrCat("set ", ticket.set_key));
}

absl::Status ClusterEngine::Settle(const CrossProcessTicket& ticket, const absl::Status& here,
                                   bool* late) {
  if (late != nullptr) *late = false;
  if (!ticket.call_ordered) return here;
  absl::StatusOr<std::shared_ptr<TicketSequencer>> sequencer = SequencerFor(ticket);
  if (!sequencer.ok()) return here.ok() ? sequencer.status() : here;
  if (!(*sequencer)->Holds(ticket.ticket)) {
    // Run never held the turn (this part failed before it, or had nothing
    // to run): the call's round happens here.
    CollectiveContext turn;
    turn.deadline = absl::Now() + options_.timeout;
    if (absl::Status s = (*sequencer)->Acquire(ticket.ticket, turn); !s.ok()) {
      return here.ok() ? s : here;
    }
    absl::Status agreed = here;
    if (Checked(ticket)) {
      agreed = Agree(ticket, here);
    } else {
      const absl::Status late = TakeLate(ticket.set_key);
      if (!here.ok() || !late.ok()) {
        agreed = here.ok() ? late : here;
        ForfeitOrdered(ticket, agreed);
      }
    }
    (*sequencer)->Finish(ticket.ticket);
    return agreed;
  }
  bool passed = false;
  {
    absl::MutexLock lock(&mu_);
    Formation& f = formations_[ticket.set_key];
    passed = f.passed == ticket.ticket;
    f.passed.reset();
    if (passed && !here.ok()) {
      f.late = absl::Status(
          here.code(), absl::StrCat("its part of call ", ticket.ticket, " of set ", ticket.set_key,
                                    " failed after the collective ran (the others' results "
                                    "of that call lack its shards): ",
                                    absl::StripSuffix(here.message(), UncheckedHint(ticket))));
      if (late != nullptr) *late = true;
    }
  }
  (*sequencer)->Finish(ticket.ticket);
  return here;
}

absl::Status ClusterEngine::RunInTurn(CollectiveKind kind, absl::Span<const CollectiveItem> items,
                                      const std::vector<ClusterItemPlan>& plans,
                                      const CollectiveContext& context) {
  if (std::none_of(plans.begin(), plans.end(),
                   [](const ClusterItemPlan& plan) { return plan.spans(); })) {
    return items.empty() ? absl::OkStatus() : options_.local->Run(kind, items, context);
  }
  // Spanning items first: other processes wait on them.
  std::vector<CollectiveItem> local_items;
  std::map<std::vector<int32_t>, uint32_t> ordinals;  // per subset
  for (size_t i = 0; i < items.size(); ++i) {
    if (!plans[i].spans()) {
      local_items.push_back(items[i]);
      continue;
    }
    if (absl::Status s = context.Check(); !s.ok()) return s;
    const uint32_t ordinal = ordinals[plans[i].processes]++;
    if (absl::Status s = RunSpanning(kind, i, ordinal, items[i], plans[i], context); !s.ok()) {
      return s;
    }
  }
  if (local_items.empty()) return absl::OkStatus();
  return options_.local->Run(kind, local_items, context);
}

absl::Status ClusterEngine::RunSpanning(CollectiveKind kind, size_t index, uint32_t ordinal,
                                        const CollectiveItem& item, const ClusterItemPlan& plan,
                                        const CollectiveContext& context) {
  const CrossProcessTicket& ticket = *context.ticket;
  if (options_.transport == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        CollectiveKindName(kind), " item ", index, " spans processes ",
        ProcessListKey(plan.processes), " but this build has no cross-process transport"));
  }
  const TransportGroupKey key{ticket.epoch, ticket.set_key, ticket.generation, plan.processes};
  const uint64_t base = ticket.call_ordered ? OrderedTagBase(ticket) : ticket.ticket;
  const std::string what = absl::StrCat("item ", index, ", ", TicketName(ticket));
  absl::Status status = RefuseLost(key, what);
  if (status.ok()) {
    status = options_.transport->Run(kind, item, plan, key, ItemTag(base, ordinal), Budget(context),
                                     what);
  }
  // The transport aborted the group; the set needs a new generation.
  if (!status.ok()) ReportFailure(ticket, status);
  return status;
}

void ClusterEngine::Forfeit(const CrossProcessTicket& ticket,
                            const std::vector<int32_t>& participants, const absl::Status& why) {
  if (participants.size() < 2) return;
  absl::StatusOr<std::shared_ptr<TicketSequencer>> sequencer = SequencerFor(ticket);
  if (!sequencer.ok()) return;
  CollectiveContext turn;
  turn.deadline = absl::Now() + options_.gap_timeout;
  // Refused when the ticket ran (or was refused) here: nothing to undo.
  if (!(*sequencer)->Acquire(ticket.ticket, turn).ok()) return;
  CloseForfeited(ticket, why);
  (*sequencer)->Finish(ticket.ticket);
}

void ClusterEngine::CloseForfeited(const CrossProcessTicket& ticket, const absl::Status& why) {
  // Peers inside an operation with this process fail as its connections
  // close; peers waiting for it in a rendezvous of the generation (the full
  // set's, or a subset's it never reached) read the key below.
  if (options_.transport != nullptr) {
    options_.transport->AbortGeneration(ticket.epoch, ticket.set_key, ticket.generation);
  }
  if (options_.store != nullptr) {
    // An earlier generation's key of the set goes (as at the set's next
    // call): every part of that generation has ended.
    RetireAbandoned(ticket);
    {
      absl::MutexLock lock(&mu_);
      abandoned_[ticket.set_key] = {ticket.epoch, ticket.generation, absl::Now()};
    }
    options_.store
        ->Set(GenerationAbandonedKey(ticket.epoch, ticket.set_key, ticket.generation),
              absl::StrCat("process ", options_.process_index, " gave up ", TicketName(ticket),
                           ": ", why.message()))
        .IgnoreError();
  }
  ReportFailure(ticket, absl::Status(why.code(), absl::StrCat("forfeited here: ", why.message())));
}

void ClusterEngine::RetireAbandoned(const CrossProcessTicket& ticket) {
  {
    absl::MutexLock lock(&mu_);
    if (abandoned_.empty()) return;
  }
  const absl::Time stale = absl::Now() - 2 * options_.timeout;
  DeleteAbandoned([&](const std::string& set, const Abandoned& given_up) {
    const bool next_generation =
        set == ticket.set_key &&
        (given_up.epoch != ticket.epoch || given_up.generation != ticket.generation);
    return next_generation || given_up.at < stale;
  });
}

void ClusterEngine::DeleteAbandoned(
    absl::FunctionRef<bool(const std::string& set, const Abandoned&)> over) {
  std::vector<std::string> keys;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = abandoned_.begin(); it != abandoned_.end();) {
      if (!over(it->first, it->second)) {
        ++it;
        continue;
      }
      keys.push_back(GenerationAbandonedKey(it->second.epoch, it->first, it->second.generation));
      it = abandoned_.erase(it);
    }
  }
  if (options_.store == nullptr) return;
  for (const std::string& key : keys) options_.store->DeletePrefix(key).IgnoreError();
}

void ClusterEngine::ReportFailure(const CrossProcessTicket& ticket, const absl::Status& status) {
  LogWarning("cluster collective (", TicketName(ticket), ") failed on process ",
             options_.process_index, ": ", status.ToString());
  if (options_.on_failure) options_.on_failure(ticket, status);
}

absl::Duration ClusterEngine::Budget(const CollectiveContext& context) const {
  absl::Duration budget = options_.timeout;
  if (context.deadline != absl::InfiniteFuture()) {
    budget = std::min(budget, context.deadline - absl::Now());
  }
  return budget;
}

absl::StatusOr<std::shared_ptr<TicketSequencer>> ClusterEngine::SequencerFor(
    const CrossProcessTicket& ticket) {
  if (ticket.call_ordered) {
    Formation retired;
    std::shared_ptr<TicketSequencer> current;
    {
      absl::MutexLock lock(&mu_);
      Formation& f = formations_[ticket.set_key];
      if (f.sequencer != nullptr && f.epoch == ticket.epoch && f.generation == ticket.generation) {
        return f.sequencer;
      }
      if (f.sequencer != nullptr &&
          std::make_pair(ticket.epoch, ticket.generation) < std::make_pair(f.epoch, f.generation)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "call ", ticket.ticket, " of set ", ticket.set_key, " (formed at epoch ", ticket.epoch,
            ", generation ", ticket.generation, ") was overtaken: the set formed again at epoch ",
            f.epoch, ", generation ", f.generation));
      }
      retired = std::move(f);
      // No gap is skipped: this process numbered every call of the
      // formation itself and each one reaches Run or Settle, so a missing
      // predecessor is on its way (a slow part), and running past it would
      // run the calls out of the others' order. The turn's deadline bounds
      // the wait.
      f = Formation{ticket.epoch, ticket.generation,
                    std::make_shared<TicketSequencer>(
                        absl::StrCat("set ", ticket.set_key, " epoch ", ticket.epoch,
                                     " generation ", ticket.generation),
                        absl::InfiniteDuration())};
      current = f.sequencer;
    }
    if (retired.sequencer != nullptr) {
      retired.sequencer->Close();
      if (options_.transport != nullptr) {
        options_.transport->AbortGeneration(retired.epoch, ticket.set_key, retired.generation);
      }
      // Every process of the set met again to form the new one, so nobody
      // still reads the retired formation's forfeit notice: the lowest
      // process deletes it.
      if (options_.store != nullptr && !ticket.processes.empty() &&
          ticket.processes.front() == options_.process_index) {
        options_.store
            ->DeletePrefix(ForfeitPrefix(ticket.set_key, retired.epoch, retired.generation))
            .IgnoreError();
      }
    }
    return current;
  }
  absl::MutexLock lock(&mu_);
  if (ticket.epoch < min_epoch_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket.ticket, " of set ", ticket.set_key, " is from epoch ",
                     ticket.epoch, ", retired (this process is at epoch ", min_epoch_, ")"));
  }
  std::shared_ptr<TicketSequencer>& sequencer = sequencers_[{ticket.epoch, ticket.set_key}];
  if (sequencer == nullptr) {
    sequencer = std::make_shared<TicketSequencer>(
        absl::StrCat("set ", ticket.set_key, " epoch ", ticket.epoch), options_.gap_timeout);
  }
  return sequencer;
}

void ClusterEngine::AbortProcess(int32_t process, uint64_t epoch, const std::string& why) {
  {
    absl::MutexLock lock(&aborts_mu_);
    ++aborts_[process];
    Loss& loss = lost_[process];
    if (epoch >= loss.epoch) loss = Loss{epoch, why};
  }
  if (options_.transport != nullptr) options_.transport->AbortProcess(process, epoch, why);
}

void ClusterEngine::DropEpochsBefore(uint64_t epoch) {
  std::vector<std::shared_ptr<TicketSequencer>> retired;
  // Formations outlive their epoch: their groups and their forfeited
  // generation's key stay until the set forms again.
  std::vector<TransportGroupKey> kept;
  {
    absl::MutexLock lock(&mu_);
    min_epoch_ = std::max(min_epoch_, epoch);
    auto end = sequencers_.lower_bound({epoch, std::string()});
    for (auto it = sequencers_.begin(); it != end; ++it) retired.push_back(it->second);
    sequencers_.erase(sequencers_.begin(), end);
    for (const auto& [set, formation] : formations_) {
      if (formation.epoch < epoch) kept.push_back({formation.epoch, set, formation.generation, {}});
    }
  }
  for (const auto& sequencer : retired) sequencer->Close();
  if (options_.transport != nullptr) options_.transport->DropEpochsBefore(epoch, kept);
  DeleteAbandoned([&](const std::string& set, const Abandoned& given_up) {
    return given_up.epoch < epoch &&
           std::none_of(kept.begin(), kept.end(), [&](const TransportGroupKey& k) {
             return k.set_key == set && k.epoch == given_up.epoch &&
                    k.generation == given_up.generation;
           });
  });
}

}  // namespace placement::server
