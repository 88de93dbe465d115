// Abseil's lock-order (deadlock) detection, per build type.
//
// Debian's Abseil is built without NDEBUG, so by default every
// absl::Mutex::Lock records the acquisition in a process-wide lock-order
// graph (absl's deadlock detection; it showed in profiles of the daemon's
// small RPCs). Our Release binaries (built with NDEBUG) turn it off at the
// top of main; Debug and sanitizer builds keep it, and abort on a lock-order
// cycle. Libraries never call this: it changes the whole process.
#ifndef PLACEMENT_COMMON_LOCK_ORDER_CHECKS_H_
#define PLACEMENT_COMMON_LOCK_ORDER_CHECKS_H_

namespace placement {

// Turns absl::Mutex deadlock detection off when this file was compiled with
// NDEBUG; a no-op otherwise. Call before any thread starts.
void SkipLockOrderChecksInRelease();

}  // namespace placement

#endif  // PLACEMENT_COMMON_LOCK_ORDER_CHECKS_H_
