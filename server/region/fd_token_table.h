// FdTokenTable: the fds same-host clients deposited on the region socket and
// have not yet claimed with RegisterRegion, each behind a random 128-bit
// token (32 hex digits), single-use, dropped after `ttl`.
//
// Bounds, so that no client can take another's place: at most
// `max_per_process` unclaimed fds per depositing process, `max_per_uid` per
// uid and `max_total` over all. Processes in a pid namespace the daemon
// cannot see (pid 0) are bounded by their uid only: nothing tells them
// apart, and one must not fill a bound the others share. A deposit past a bound is refused (the fd
// is closed) with RESOURCE_EXHAUSTED naming the bound; nothing is ever evicted to make room, so one
// client flooding the socket cannot invalidate another client's token.
//
// Thread-safe. The destructor closes every unclaimed fd.
#ifndef PLACEMENT_SERVER_REGION_FD_TOKEN_TABLE_H_
#define PLACEMENT_SERVER_REGION_FD_TOKEN_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/region/peer_process.h"

namespace placement::server {

struct FdTokenLimits {
  absl::Duration ttl = absl::Seconds(60);
  int64_t max_total = 256;
  int64_t max_per_uid = 128;
  int64_t max_per_process = 32;
};

// A claimed fd (the caller owns and closes it) and who deposited it.
struct ClaimedFd {
  int fd = -1;
  std::shared_ptr<PeerProcess> depositor;
};

class FdTokenTable {
 public:
  explicit FdTokenTable(FdTokenLimits limits) : limits_(limits) {}
  ~FdTokenTable();
  FdTokenTable(const FdTokenTable&) = delete;
  FdTokenTable& operator=(const FdTokenTable&) = delete;

  // Keeps `fd` (taking it) for `depositor` and returns its token.
  // RESOURCE_EXHAUSTED naming the bound and the depositor when a bound is
  // reached; `fd` is closed then. REQUIRES: depositor != nullptr.
  absl::StatusOr<std::string> Deposit(int fd, std::shared_ptr<PeerProcess> depositor);
  // Takes the fd deposited with `token`. NOT_FOUND for an unknown, expired or
  // already claimed token (`where` is named in the message: the socket).
  absl::StatusOr<ClaimedFd> Take(const std::string& token, const std::string& where);
  // Who deposited the fd of `token`, which stays (a claim can be checked
  // before it uses the token up). NOT_FOUND as Take.
  absl::StatusOr<std::shared_ptr<PeerProcess>> DepositorOf(const std::string& token,
                                                           const std::string& where) const;

  int64_t size() const;
  // Drops the tokens expired by `now` (closing their fds), as Deposit and
  // Take also do; returns when the next one expires (InfiniteFuture: none
  // left). The listener's loop calls it, so an unclaimed fd -- and the
  // client memory it keeps alive -- goes at its ttl, not at the next use.
  absl::Time Sweep(absl::Time now);

 private:
  struct Pending {
    int fd = -1;
    absl::Time expire;
    std::shared_ptr<PeerProcess> depositor;
  };
  // Drops expired tokens (closing their fds); returns when the next of
  // those left expires (InfiniteFuture when none is left).
  absl::Time SweepLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetLocked(const Pending& pending) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FdTokenLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<pid_t, int64_t> per_process_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, int64_t> per_uid_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_FD_TOKEN_TABLE_H_
