// systemd integration: READY=1 once serving, STOPPING=1 when draining, and
// watchdog pings at half of WatchdogSec when the unit sets it. Does nothing
// when not started by systemd (no NOTIFY_SOCKET) or built without libsystemd.
#ifndef PLACEMENT_SERVER_SYSTEMD_NOTIFIER_H_
#define PLACEMENT_SERVER_SYSTEMD_NOTIFIER_H_

#include <atomic>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"

namespace placement::server {

class SystemdNotifier {
 public:
  SystemdNotifier() = default;
  ~SystemdNotifier();
  // Sends READY=1 with a STATUS line and starts the watchdog thread.
  void NotifyReady(const std::string& status);
  void NotifyStopping();

 private:
  absl::Notification stop_;
  std::thread watchdog_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SYSTEMD_NOTIFIER_H_
