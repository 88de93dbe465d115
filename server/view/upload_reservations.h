// UploadReservations: uploads a same-host trainer writes in place
// (ViewService.ReserveUpload / CommitUpload / CancelUpload,
// docs/api/views.md "Writing in place").
//
// A reservation holds an UploadSession (the tensor's shards allocated for
// the caller's tenant, not yet visible) and, per local shard, the platform's
// writable export of its memory (DeviceBackend::ExportWritable). The fds
// wait behind a single-use token that the client redeems on the region
// socket, as view tokens are (Redeem, tried by the daemon's redeemer after
// the export registry's). CommitUpload publishes the tensor with the bytes
// its memory holds then: no copy by the daemon.
//
// A reservation belongs to the caller's tenant: another tenant's calls see
// NOT_FOUND, word for word the answer for an id that never existed. It ends
// at the first of Commit, Cancel, the exit of the process that redeemed its
// token, its token not redeemed within `ttl` (a background thread; a
// redeemed reservation lasts as long as its writer copies, or `ttl` more
// where writers cannot be watched), or the registry's destruction; ending
// it frees the shards' memory (unless committed) -- into the tenant's cache,
// so only the tenant's own writer can still reach it. At most `max_open`
// exist at once over all tenants, `max_open_per_tenant` per tenant.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_VIEW_UPLOAD_RESERVATIONS_H_
#define PLACEMENT_SERVER_VIEW_UPLOAD_RESERVATIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth/caller.h"
#include "server/common/expiry_thread.h"
#include "server/device/device_backend.h"
#include "server/region/peer_process.h"
#include "server/region/process_exit_watcher.h"
#include "server/tensor/tensor.h"
#include "server/tensor/upload_session.h"
#include "server/view/export_options.h"

namespace placement::server {

// Where one shard's bytes are to be written (view_service.proto UploadSlot).
struct UploadSlotInfo {
  int32_t shard_index = 0;
  int64_t device_id = 0;
  int64_t size = 0;
  int32_t fd_index = -1;
  int64_t offset = 0;
  int64_t file_size = 0;
};

struct ReservationSnapshot {
  std::string id;  // "u-" and 32 hex digits
  std::vector<UploadSlotInfo> slots;
  std::string fd_token;
  absl::Time expires;
};

class UploadReservations {
 public:
  // `backend` outlives the registry. `fd_passing`: whether the region socket
  // is on (FAILED_PRECONDITION without it: no fd can reach the client).
  UploadReservations(DeviceBackend* backend, bool fd_passing, UploadReservationOptions options);
  ~UploadReservations();
  UploadReservations(const UploadReservations&) = delete;
  UploadReservations& operator=(const UploadReservations&) = delete;

  // What Reserve would refuse before anything is allocated:
  // FAILED_PRECONDITION with fd passing off, RESOURCE_EXHAUSTED at a bound.
  absl::Status CheckRoom(const Caller& caller) const;

  // Hands out every shard of `upload`'s tensor (an upload session no byte
  // was written to, allocated for memory owner `owner`: the caller's
  // tenant's) for writing in place, for `caller`. CheckRoom's errors;
  // FAILED_PRECONDITION: a shard on another daemon, a shard the platform
  // cannot hand out (naming the shard); UNIMPLEMENTED: a platform without
  // writable exports. Nothing is kept on error.
  absl::StatusOr<ReservationSnapshot> Reserve(const Caller& caller,
                                              std::unique_ptr<UploadSession> upload,
                                              MemoryOwnerTag owner);

  // Publishes the reservation's tensor. NOT_FOUND: unknown, ended, or
  // another tenant's; FAILED_PRECONDITION: its token was never redeemed (the
  // reservation stays).
  absl::StatusOr<std::shared_ptr<const Tensor>> Commit(const Caller& caller, const std::string& id);
  // Ends a reservation and frees its memory. NOT_FOUND as Commit.
  absl::Status Cancel(const Caller& caller, const std::string& id);

  // Hands the fds behind `token` to `writer` (the caller owns them, in
  // fd_index order) and binds the reservation to that process. NOT_FOUND for
  // an unknown, used or expired token.
  absl::StatusOr<std::vector<int>> Redeem(const std::string& token,
                                          const std::shared_ptr<PeerProcess>& writer);

  int64_t size() const;
  // Device bytes the open reservations hold.
  int64_t open_bytes() const;
  // Reservations ended by commit, cancel, the writer's exit or expiry since
  // the start.
  struct Counts {
    int64_t committed = 0;
    int64_t cancelled = 0;
    int64_t writer_exited = 0;
    int64_t expired = 0;
    int64_t committed_bytes = 0;
  };
  Counts counts() const;

 private:
  struct Record;
  std::unique_ptr<Record> TakeLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckRoomLocked(const std::string& tenant) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Drops a reservation that ended (outside mu_): cancels its exit watch,
  // frees its memory.
  void Drop(std::unique_ptr<Record> record);
  void WriterExited(const std::string& id);
  // Ends the reservations past their deadline; returns the next one.
  absl::Time Expire(absl::Time now);

  DeviceBackend* const backend_;
  const bool fd_passing_;
  const UploadReservationOptions options_;
  std::unique_ptr<ProcessExitWatcher> exits_;  // null when pidfds cannot be watched

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Record>> open_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> tokens_ ABSL_GUARDED_BY(mu_);  // -> id
  absl::flat_hash_map<std::string, int64_t> per_tenant_ ABSL_GUARDED_BY(mu_);
  int64_t open_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  Counts counts_ ABSL_GUARDED_BY(mu_);
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed (stopped) first.
  std::unique_ptr<ExpiryThread> expirer_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_VIEW_UPLOAD_RESERVATIONS_H_
