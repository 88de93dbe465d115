// ExpiryThread: the background thread that ends what outlived its deadline
// (unredeemed view exports, upload reservations). It calls `sweep(now)`,
// which ends whatever expired and returns the earliest deadline still ahead
// (absl::InfiniteFuture() for none), again at that deadline or when Wake()
// says an earlier one may exist. `sweep` runs on the thread, never under a
// lock of this class. The destructor stops and joins the thread: destroy it
// before anything `sweep` touches.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_COMMON_EXPIRY_THREAD_H_
#define PLACEMENT_SERVER_COMMON_EXPIRY_THREAD_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

class ExpiryThread {
 public:
  explicit ExpiryThread(std::function<absl::Time(absl::Time now)> sweep);
  ~ExpiryThread();
  ExpiryThread(const ExpiryThread&) = delete;
  ExpiryThread& operator=(const ExpiryThread&) = delete;

  // A deadline earlier than the one waited for may exist now: sweep again.
  void Wake();

 private:
  void Run();

  const std::function<absl::Time(absl::Time)> sweep_;
  absl::Mutex mu_;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COMMON_EXPIRY_THREAD_H_
