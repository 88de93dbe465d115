#include "common/lock_order_checks.h"

#include "absl/synchronization/mutex.h"

namespace placement {

void SkipLockOrderChecksInRelease() {
#ifdef NDEBUG
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
#endif
}

}  // namespace placement
