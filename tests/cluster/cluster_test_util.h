// Helpers the cluster tests share: polling a daemon's view of its cluster
// until a condition holds (bounded), and status assertions.
#ifndef PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_
#define PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "placement/client/client.h"
#include "tests/testing/cluster_processes.h"

namespace placement::testing {

// Polls GetStatus on `client` until `pred(status)` or `timeout`; returns the
// last status seen (or the error).
inline absl::StatusOr<client::DaemonStatus> WaitForStatus(
    const client::Client& client, const std::function<bool(const client::DaemonStatus&)>& pred,
    absl::Duration timeout = absl::Seconds(20)) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::StatusOr<client::DaemonStatus> status = client.GetStatus();
  while (absl::Now() < deadline) {
    status = client.GetStatus();
    if (status.ok() && pred(*status)) return status;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return status;
}

inline bool ProcessIs(const client::DaemonStatus& s, int32_t process, client::ProcessState state) {
  return process < static_cast<int32_t>(s.cluster.processes.size()) &&
         s.cluster.processes[process].state == state;
}

}  // namespace placement::testing

#endif  // PLACEMENT_TESTS_CLUSTER_CLUSTER_TEST_UTIL_H_
