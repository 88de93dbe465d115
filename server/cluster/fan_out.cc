#include "server/cluster/fan_out.h"

#include <algorithm>
#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {
namespace {

constexpr char kUnreachablePayload[] = "placement.peer/unreachable-process";

}  // namespace

void MarkUnreachable(absl::Status& status, int32_t process) {
  status.SetPayload(kUnreachablePayload, absl::Cord(absl::StrCat(process)));
}

bool IsUnreachable(const absl::Status& status) {
  return status.GetPayload(kUnreachablePayload).has_value();
}

bool IsConsequence(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kAborted:
      return true;
    default:
      return false;
  }
}

namespace {

// The status that explains a fan-out's results (see FanOut).
absl::Status Explaining(const std::vector<absl::Status>& results) {
  for (const absl::Status& s : results) {
    if (!s.ok() && !IsConsequence(s)) return s;
  }
  for (const absl::Status& s : results) {
    if (IsUnreachable(s)) return s;
  }
  // A part refused or told of a loss says why; a wait that ran out or was
  // cancelled only says that someone did not come.
  for (const absl::Status& s : results) {
    if (s.code() == absl::StatusCode::kUnavailable || s.code() == absl::StatusCode::kAborted) {
      return s;
    }
  }
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FanOutAsync(const std::vector<int32_t>& processes, const StartCall& start,
                         int32_t here, const std::function<absl::Status()>& run_here,
                         int* succeeded) {
  struct Waiting {
    absl::Mutex mu;
    size_t pending ABSL_GUARDED_BY(mu) = 0;
    std::vector<absl::Status> results ABSL_GUARDED_BY(mu);
  } waiting;
  {
    absl::MutexLock lock(&waiting.mu);
    waiting.results.resize(processes.size());
    for (int32_t p : processes) waiting.pending += p == here ? 0 : 1;
  }
  std::vector<std::unique_ptr<PeerTransport::PendingCall>> calls;
  calls.reserve(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    if (processes[i] == here) continue;
    calls.push_back(start(processes[i], [&waiting, i](absl::Status status) {
      absl::MutexLock lock(&waiting.mu);
      waiting.results[i] = std::move(status);
      --waiting.pending;
    }));
  }
  absl::Status mine = absl::OkStatus();
  const bool takes_part = std::find(processes.begin(), processes.end(), here) != processes.end();
  if (takes_part && run_here) mine = run_here();
  // A transport that completes calls on the waiting thread runs their
  // `done` here; one with threads of its own ran or runs them there.
  for (const auto& call : calls) call->Wait();
  std::vector<absl::Status> results;
  {
    absl::MutexLock lock(&waiting.mu);
    waiting.mu.Await(absl::Condition(
        +[](Waiting* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu) { return w->pending == 0; },
        &waiting));
    results = std::move(waiting.results);
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    if (processes[i] == here) results[i] = mine;
  }
  // Every `done` ran: the calls may go.
  calls.clear();
  if (succeeded != nullptr) {
    *succeeded = static_cast<int>(
        std::count_if(results.begin(), results.end(), [](const auto& s) { return s.ok(); }));
  }
  return Explaining(results);
}

}  // namespace placement::server
