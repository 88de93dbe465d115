#include "server/collective/cluster/ticket_sequencer.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {
namespace {

// How often a waiting call polls CollectiveContext::cancelled.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(10);

}  // namespace

TicketSequencer::TicketSequencer(std::string name, absl::Duration gap_timeout)
    : name_(std::move(name)), gap_timeout_(gap_timeout), last_progress_(absl::Now()) {}

absl::Status TicketSequencer::Acquire(uint64_t ticket, const CollectiveContext& context) {
  absl::MutexLock lock(&mu_);
  if (closed_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket, " of ", name_, ": the epoch was retired"));
  }
  if (ticket < next_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket, " of ", name_,
                     " is older than what already ran here (next ticket: ", next_, ")"));
  }
  if (running_ && ticket == next_) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket, " of ", name_, " is running here already"));
  }
  if (finished_.contains(ticket)) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket, " of ", name_,
                     " was given up here already (refused, cancelled or abandoned before its "
                     "turn; next ticket: ",
                     next_, ")"));
  }
  if (!waiting_.insert(ticket).second) {
    return absl::FailedPreconditionError(
        absl::StrCat("ticket ", ticket, " of ", name_, " is already waiting"));
  }
  const absl::Time arrival = absl::Now();
  for (;;) {
    if (closed_) {
      waiting_.erase(ticket);
      return absl::FailedPreconditionError(absl::StrCat("ticket ", ticket, " of ", name_,
                                                        ": the epoch was retired while it waited"));
    }
    if (!running_ && next_ == ticket) {
      waiting_.erase(ticket);
      running_ = true;
      return absl::OkStatus();
    }
    if (absl::Status s = context.Check(); !s.ok()) {
      waiting_.erase(ticket);
      FinishedLocked(ticket);
      return absl::Status(s.code(), absl::StrCat(s.message(), " while ticket ", ticket, " of ",
                                                 name_, " waited for ticket ", next_));
    }
    const absl::Time now = absl::Now();
    absl::Time wake = context.deadline;
    if (!running_ && *waiting_.begin() == ticket) {
      // The lowest waiter, and tickets next_ .. ticket-1 are not here.
      const absl::Time skip_at = std::max(arrival, last_progress_) + gap_timeout_;
      if (now >= skip_at) {
        LogWarning("collective ", name_, ": tickets ", next_, "..", ticket - 1,
                   " did not arrive within ", absl::FormatDuration(gap_timeout_),
                   "; skipping them and running ticket ", ticket);
        finished_.erase(finished_.begin(), finished_.lower_bound(ticket));
        next_ = ticket;
        last_progress_ = now;
        continue;
      }
      wake = std::min(wake, skip_at);
    }
    if (context.cancelled) wake = std::min(wake, now + kCancelPoll);
    changed_.WaitWithDeadline(&mu_, wake);
  }
}

void TicketSequencer::Finish(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  if (!running_ || ticket != next_) return;
  running_ = false;
  ++next_;
  AdvanceLocked();
  last_progress_ = absl::Now();
  changed_.SignalAll();
}

void TicketSequencer::Abandon(uint64_t ticket) {
  absl::MutexLock lock(&mu_);
  FinishedLocked(ticket);
}

void TicketSequencer::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  changed_.SignalAll();
}

bool TicketSequencer::Holds(uint64_t ticket) const {
  absl::MutexLock lock(&mu_);
  return running_ && next_ == ticket;
}

uint64_t TicketSequencer::next() const {
  absl::MutexLock lock(&mu_);
  return next_;
}

void TicketSequencer::FinishedLocked(uint64_t ticket) {
  if (ticket < next_ || (running_ && ticket == next_)) return;
  if (ticket == next_) {
    ++next_;
    AdvanceLocked();
    last_progress_ = absl::Now();
  } else {
    finished_.insert(ticket);
  }
  changed_.SignalAll();
}

void TicketSequencer::AdvanceLocked() {
  while (!finished_.empty() && *finished_.begin() == next_) {
    finished_.erase(finished_.begin());
    ++next_;
  }
}

}  // namespace placement::server
