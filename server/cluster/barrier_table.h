// BarrierTable: the coordinator's barriers with payloads (a small
// all-gather through the coordinator, like XLA's WaitAtBarrier plus a
// key-value exchange). Multi-controller uploads meet here to agree on a
// tensor's layout and id; collectives that span processes meet here to get
// their place in their process set's order (a ticket).
//
// An instance of barrier `id` starts with the first arrival, which fixes
// the participants and the deadline (its timeout); it completes when every
// participant has arrived, and then it is gone: the next arrival with the
// same id starts a new instance. Every participant leaves with every
// payload (in participant order), one random token, and -- with a
// sequence key -- the next ticket of that key in the current epoch (tickets
// count 0, 1, 2, ... again in every epoch) and the key's generation.
//
// Arrivals hold no thread: each waits as a callback (AsyncWait), completed
// when the last participant arrives, when a deadline passes (on the
// DeadlineTimer's thread) or at shutdown, so a barrier may have any number
// of participants.
//
// Failure: a waiter whose deadline passes fails the instance for everyone
// (DEADLINE_EXCEEDED naming the processes that did not arrive); a
// participant that membership loses fails it with UNAVAILABLE naming that
// process. Participants must agree on the participant list
// (INVALID_ARGUMENT otherwise); arriving twice is ALREADY_EXISTS.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_BARRIER_TABLE_H_
#define PLACEMENT_SERVER_CLUSTER_BARRIER_TABLE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/cluster_state.h"
#include "server/cluster/async_wait.h"
#include "server/cluster/deadline_timer.h"

namespace placement::server {

struct BarrierArrival {
  std::string barrier_id;
  int32_t process_index = 0;
  std::vector<int32_t> participants;  // ascending, non-empty
  std::string payload;
  absl::Duration timeout = absl::Seconds(60);
  std::string sequence_key;  // empty: no ticket
};

struct BarrierResult {
  std::vector<int32_t> participants;
  std::vector<std::string> payloads;  // by participant
  std::string token;
  int64_t ticket = 0;
  int64_t generation = 0;
  int64_t epoch = 0;
};

class BarrierTable {
 public:
  static constexpr size_t kMaxPayloadBytes = size_t{1} << 20;
  static constexpr size_t kMaxOpenBarriers = 100000;

  using ArriveDone = AsyncWait<BarrierResult>::Done;

  // REQUIRES: `timer` outlives the table.
  explicit BarrierTable(DeadlineTimer* timer) : timer_(timer) {}
  ~BarrierTable();  // fails open barriers with UNAVAILABLE

  // Arrives; `done` gets the result once every participant arrived, or the
  // error (see the header comment). `done` may run on this thread before
  // Arrive returns (the last arrival, or a refusal), on another arrival's
  // thread, on the timer's or on a membership change's.
  void Arrive(const BarrierArrival& arrival, ArriveDone done);
  // Arrive, waiting on this thread (tests, tools).
  absl::StatusOr<BarrierResult> ArriveBlocking(const BarrierArrival& arrival);

  // The membership moved to `epoch`; `gone` processes (every one lost or
  // left now, with which) fail the instances that wait for them, and later
  // arrivals that name them: UNAVAILABLE "barrier 'x': process 1 is lost
  // (killed or cut off; epoch 4)" or "... left the cluster (drained; ...)".
  // Tickets restart at 0 in the new epoch.
  void OnMembershipChange(int64_t epoch, const std::vector<std::pair<int32_t, ProcessState>>& gone);

  // Bumps `sequence_key`'s generation if it still is `generation`; returns
  // the generation now.
  int64_t ReportFailure(const std::string& sequence_key, int64_t generation);

  int64_t open_barriers() const;
  // Fails every open barrier, and every later arrival, with UNAVAILABLE.
  void Shutdown();

 private:
  using Wait = AsyncWait<BarrierResult>;
  struct Instance {
    std::string id;
    std::vector<int32_t> participants;
    std::map<int32_t, std::string> payloads;
    std::string sequence_key;
    std::vector<std::shared_ptr<Wait>> waits;  // one per arrival
  };
  struct Sequence {
    int64_t epoch = 0;
    int64_t next = 0;
    int64_t generation = 0;
  };

  // Ends every wait of `instance` with `result` (into `done`).
  void EndLocked(Instance& instance, const absl::StatusOr<BarrierResult>& result,
                 Completions<BarrierResult>& done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  BarrierResult ResultLocked(const Instance& instance) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void TimedOut(const std::shared_ptr<Instance>& instance, absl::Duration timeout);

  DeadlineTimer* const timer_;

  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<Instance>> open_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Sequence> sequences_ ABSL_GUARDED_BY(mu_);
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Processes the membership counts as lost now: an arrival naming one
  // fails at once.
  std::vector<std::pair<int32_t, ProcessState>> gone_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_BARRIER_TABLE_H_
