#include "server/cluster/coordinator.h"

#include <vector>

#include "absl/time/clock.h"

namespace placement::server {

Coordinator::Coordinator(MembershipOptions options)
    : timer_(std::make_unique<DeadlineTimer>()),
      membership_(options, timer_.get()),
      kv_(timer_.get()),
      barriers_(timer_.get()),
      sweep_interval_(std::max(options.heartbeat_interval / 2, absl::Milliseconds(10))) {
  membership_.AddListener([this](const ClusterView& view) {
    std::vector<std::pair<int32_t, ProcessState>> gone;
    for (const ProcessRecord& p : view.processes) {
      if (p.state == ProcessState::kLost || p.state == ProcessState::kLeft) {
        gone.push_back({p.process_index, p.state});
      }
    }
    barriers_.OnMembershipChange(view.epoch, gone);
  });
  sweeper_ = std::thread([this] {
    while (!stop_.WaitForNotificationWithTimeout(sweep_interval_)) membership_.Sweep(absl::Now());
  });
}

void Coordinator::Shutdown() {
  membership_.Shutdown();
  kv_.Shutdown();
  barriers_.Shutdown();
}

Coordinator::~Coordinator() {
  Shutdown();
  stop_.Notify();
  sweeper_.join();
  // No wait is left to time out; the components' own Shutdown (in their
  // destructors) finds nothing to cancel.
  timer_.reset();
}

}  // namespace placement::server
