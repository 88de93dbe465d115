// TicketSequencer: on this process, runs the calls of one process set in one
// membership epoch in the order of their CrossProcessTicket -- the order the
// cluster coordinator issued them in and in which every process of the set
// executes them, so the Gloo operations of different processes match.
//
// Ticket t runs once tickets 0 .. t-1 have finished here (successfully or
// not), were abandoned (never ran here: invalid arguments, cancelled while
// waiting), or were skipped. A gap -- a ticket that never reached this
// process -- is skipped once the lowest waiting ticket has waited
// `gap_timeout` with nothing running and no progress (logged; an infinite
// `gap_timeout` never skips, as a formation's sequencer). A ticket that
// arrives after its turn passed is refused.
//
// Example: tickets 1 and 2 arrive first and wait; 0 arrives, runs, finishes;
// 1 runs, then 2. Had 0 never come, 1 would have run gap_timeout after it
// arrived, and a late 0 would be refused with FAILED_PRECONDITION.
//
// Thread-safe: each waiting call blocks its own thread.
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_TICKET_SEQUENCER_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_TICKET_SEQUENCER_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/collective_engine.h"

namespace placement::server {

class TicketSequencer {
 public:
  // `name` identifies the set and epoch in messages ("set 0,1 epoch 3").
  TicketSequencer(std::string name, absl::Duration gap_timeout);
  TicketSequencer(const TicketSequencer&) = delete;
  TicketSequencer& operator=(const TicketSequencer&) = delete;

  // Blocks until `ticket` may run. OK: the caller runs it and then MUST call
  // Finish(ticket). FAILED_PRECONDITION when the ticket's turn has passed
  // (it or a later ticket already ran, or it was skipped), when the same
  // ticket is already waiting or running, or once Close() was called.
  // CANCELLED / DEADLINE_EXCEEDED when `context` says so while waiting (it
  // is polled every few milliseconds when it has `cancelled`); the ticket
  // then counts as finished.
  absl::Status Acquire(uint64_t ticket, const CollectiveContext& context);

  // Ends the run of `ticket` (after Acquire returned OK): the next may run.
  void Finish(uint64_t ticket);

  // Counts `ticket`, which will not run on this process, as finished so its
  // successors need not wait for it. No-op when its turn has passed.
  // REQUIRES: `ticket` is not waiting in Acquire.
  void Abandon(uint64_t ticket);

  // Fails every waiting and later Acquire with FAILED_PRECONDITION (the
  // epoch was retired). A running ticket may still Finish.
  void Close();

  // Whether `ticket` holds the turn (Acquire returned OK, no Finish yet).
  bool Holds(uint64_t ticket) const;

  // The lowest ticket that has neither finished nor been skipped.
  uint64_t next() const;

 private:
  // Marks `ticket` finished outside its turn, or advances when it is next.
  void FinishedLocked(uint64_t ticket) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves next_ past tickets already finished out of turn.
  void AdvanceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string name_;
  const absl::Duration gap_timeout_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  bool running_ ABSL_GUARDED_BY(mu_) = false;  // next_ is running
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::set<uint64_t> waiting_ ABSL_GUARDED_BY(mu_);
  std::set<uint64_t> finished_ ABSL_GUARDED_BY(mu_);  // > next_, finished out of turn
  absl::Time last_progress_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_TICKET_SEQUENCER_H_
