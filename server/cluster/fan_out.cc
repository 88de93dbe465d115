#include "server/cluster/fan_out.h"

#include <thread>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

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

absl::Status FanOut(const std::vector<int32_t>& processes,
                    const std::function<absl::Status(int32_t)>& fn) {
  if (processes.size() == 1) return fn(processes.front());
  std::vector<absl::Status> results(processes.size());
  std::vector<std::thread> threads;
  threads.reserve(processes.size());
  for (size_t i = 0; i < processes.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = fn(processes[i]); });
  }
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : results) {
    if (!s.ok() && !IsConsequence(s)) return s;
  }
  for (const absl::Status& s : results) {
    if (IsUnreachable(s)) return s;
  }
  for (const absl::Status& s : results) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace placement::server
