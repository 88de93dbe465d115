#include "server/systemd_notifier.h"

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "server/logging.h"

#if PLACEMENT_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

namespace placement::server {

SystemdNotifier::~SystemdNotifier() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (watchdog_.joinable()) watchdog_.join();
}

void SystemdNotifier::NotifyReady(const std::string& status) {
#if PLACEMENT_HAVE_SYSTEMD
  sd_notify(0, absl::StrCat("READY=1\nSTATUS=", status).c_str());
  uint64_t usec = 0;
  if (sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    absl::Duration period = absl::Microseconds(usec) / 2;
    LogInfo("systemd watchdog enabled; pinging every ", absl::FormatDuration(period));
    watchdog_ = std::thread([this, period] {
      while (!stop_.WaitForNotificationWithTimeout(period)) sd_notify(0, "WATCHDOG=1");
    });
  }
#else
  (void)status;
#endif
}

void SystemdNotifier::NotifyStopping() {
#if PLACEMENT_HAVE_SYSTEMD
  sd_notify(0, "STOPPING=1");
#endif
  if (!stop_.HasBeenNotified()) stop_.Notify();
}

}  // namespace placement::server
