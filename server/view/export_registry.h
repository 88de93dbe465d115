// ExportRegistry: the shard exports (views) the daemon has handed out to
// trainers on its host (ViewService, docs/api/views.md), and the only place
// that decides when one ends.
//
// An export holds the tensor (a shared_ptr: its memory stays allocated and
// counted against the owner's budget and quota, and TakeForDonation refuses
// it) and, per shard, the platform's ShardExport (DeviceBackend::
// ExportShard: a read-only fd of sealed memory on CPU, an IPC handle on
// CUDA). The fds wait behind a single-use token until the client redeems it
// on the region socket (Redeem, called by FdPassingListener); redeeming
// hands them over and binds the export to the redeeming process.
//
// Ownership. An export belongs to the caller's tenant and, when the call
// joined one, its session; it is visible (Unexport, List) to calls of the
// same tenant that joined the same session -- or any call of the tenant for
// an export made outside sessions -- and to admins. A tensor that belongs to
// a session (session_of) is exported only by calls joined to that session.
// Invisible exports and tensors look exactly like unknown ids (NOT_FOUND).
//
// Lifetime. An export ends at the first of: Unexport; the end of its session
// (EndSession, wired to SessionManager); the exit of the process that
// redeemed it (its pidfd); `redeem_ttl` passing without a redemption (a
// background thread ends it); the registry's destruction. Ending it drops
// the tensor reference (freeing the memory of a tensor deleted meanwhile)
// and the platform exports (closing fds not handed over, freeing private
// copies). The platform never reuses an exported block, so a reader that
// keeps its mapping past the end reads the shard's last bytes, never others.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_VIEW_EXPORT_REGISTRY_H_
#define PLACEMENT_SERVER_VIEW_EXPORT_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
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
#include "server/metrics/metrics.h"
#include "server/region/peer_process.h"
#include "server/region/process_exit_watcher.h"
#include "server/tensor/tensor.h"
#include "server/view/export_options.h"

namespace placement::server {

// Where one exported shard's bytes are (view_service.proto ShardView).
struct ShardViewInfo {
  int32_t shard_index = 0;
  int64_t device_id = 0;
  int64_t size = 0;
  int32_t fd_index = -1;
  int64_t offset = 0;
  bool copied = false;
  std::string ipc_handle;
  // A copy-out's shard handed over read-write and unsealed, and its file's size.
  bool writable = false;
  int64_t file_size = 0;
};

struct ExportSnapshot {
  std::string id;  // "x-" and 32 hex digits
  std::string tensor_id;
  std::string tenant;
  std::string session_id;
  int64_t bytes = 0;
  int32_t num_shards = 0;
  int64_t reader_pid = 0;  // 0 until redeemed
  absl::Time created;
  // Filled for the creating call only.
  std::vector<ShardViewInfo> shards;
  std::string fd_token;
};

// Why an export ended (the placementd_exports_ended_total label).
enum class ExportEnd { kUnexport, kSession, kProcessExit, kExpired, kShutdown };

class ExportRegistry {
 public:
  // `backend` and `metrics` (nullable) outlive the registry. `fd_passing`:
  // whether the region socket is on (without it a CPU export cannot reach a
  // client: FAILED_PRECONDITION).
  ExportRegistry(DeviceBackend* backend, Metrics* metrics, bool fd_passing, ExportOptions options);
  // Ends every export.
  ~ExportRegistry();
  ExportRegistry(const ExportRegistry&) = delete;
  ExportRegistry& operator=(const ExportRegistry&) = delete;

  // The session a tensor belongs to ("" = durable), and whether a session is
  // still open. REQUIRES: called before the first Export.
  void set_sessions(std::function<std::string(const std::string& tensor_id)> session_of,
                    std::function<bool(const std::string& session_id)> is_open);

  // Exports `shard_indices` of `tensor` (empty: every shard held here) for
  // `caller`, who already sees the tensor's tenant. `copy_out_owner` set:
  // the caller copies the bytes out and unexports at once (ExportShards
  // for_copy), so shards the platform hands out writable to that memory
  // owner -- the caller's tenant's (DeviceBackend::ExportWritable checks
  // the buffer is that owner's) -- go unsealed and their blocks stay
  // reusable; the others are exported as views; and with no
  // `shard_indices` only the first replica of each box held here is
  // exported. Errors as view_service.proto ExportShards says; nothing is
  // kept on error.
  absl::StatusOr<ExportSnapshot> Export(const Caller& caller, std::shared_ptr<const Tensor> tensor,
                                        const std::vector<int32_t>& shard_indices,
                                        std::optional<MemoryOwnerTag> copy_out_owner = {});
  // NOT_FOUND for an export the caller does not see.
  absl::Status Unexport(const Caller& caller, const std::string& id);
  // The exports the caller sees, sorted by id (without shards or token).
  std::vector<ExportSnapshot> List(const Caller& caller) const;
  // Exports made and shard bytes exposed since start, for the caller's tenant
  // (an admin: all).
  struct Totals {
    int64_t exports = 0;
    int64_t bytes = 0;
  };
  Totals TotalsFor(const Caller& caller) const;

  // Hands the fds of the export behind `token` to `reader` (the caller owns
  // them, in fd_index order) and binds the export to that process. NOT_FOUND
  // for an unknown, used or expired token.
  absl::StatusOr<std::vector<int>> Redeem(const std::string& token,
                                          const std::shared_ptr<PeerProcess>& reader);

  // Ends every export of `session_id`; returns how many.
  int64_t EndSession(const std::string& session_id);

  int64_t size() const;
  int64_t open_bytes() const;

 private:
  struct Record;
  bool VisibleLocked(const Caller& caller, const Record& e) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CheckLimitsLocked(const std::string& tenant) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Removes export `id`; null when it is gone already.
  std::unique_ptr<Record> TakeLocked(const std::string& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts the end and releases what the export held (outside mu_).
  void Retire(std::unique_ptr<Record> e, ExportEnd why);
  void ProcessExited(const std::string& id);
  // Ends unredeemed exports past their deadline; returns the next one.
  absl::Time Expire(absl::Time now);

  DeviceBackend* const backend_;
  Metrics* const metrics_;
  const bool fd_passing_;
  const ExportOptions options_;
  std::function<std::string(const std::string&)> session_of_;
  std::function<bool(const std::string&)> session_open_;
  // Null when pidfds cannot be watched (an export then ends by the other ways).
  std::unique_ptr<ProcessExitWatcher> exits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<Record>> exports_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> tokens_ ABSL_GUARDED_BY(mu_);  // -> export id
  absl::flat_hash_map<std::string, Totals> totals_ ABSL_GUARDED_BY(mu_);       // per tenant
  int64_t open_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed (stopped) first.
  std::unique_ptr<ExpiryThread> expirer_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_VIEW_EXPORT_REGISTRY_H_
