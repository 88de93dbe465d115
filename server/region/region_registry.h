// RegionRegistry: the shared-memory regions same-host clients registered
// (RegionService), and the only way the transfer paths reach their bytes.
//
// Ownership. A region belongs to the tenant of the call that registered it
// and to that call's session, if any. A region is visible to a caller of the
// same tenant whose call joined the same session -- or any call of the
// tenant when the region has no session; admins see every region. Invisible
// regions look exactly like unknown ids (NOT_FOUND).
//
// Lifetime. A region is unmapped on Unregister, when its session ends
// (EndSession, wired to SessionManager), when the registry is destroyed (the
// daemon stops) and -- for a region registered outside a session -- when the
// process that passed its fd exits (its pidfd, from the region socket's
// SO_PEERCRED), so a client killed with SIGKILL leaves nothing mapped and
// nothing counted against max_regions. A POSIX shm name has no such process:
// it is accepted only within a session.
//
// Transfers. Acquire bounds-checks one slice (region_bounds.h) and returns
// RegionBytes, which keeps the region mapped while it lives and is the only
// way to its bytes: ReadInto / WriteFrom hand out the mapping itself for a
// sealed memfd, and go through pread/pwrite for an unsealed shm object
// (unsealed_shm_file.h), so a client that shrinks its memory fails its own
// transfer instead of faulting the daemon. Unregister removes the region at
// once (later Acquires fail NOT_FOUND), then waits for the RegionBytes alive
// at that moment -- copies at memory speed -- before unmapping, so a transfer
// never touches unmapped memory and the client may reuse its memory as soon
// as Unregister returns.
//
// Pinning. When the backend can register host memory for DMA
// (cudaHostRegister), set_pinning installs the hooks: regions are pinned when
// registered and unpinned before they are unmapped.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_REGION_REGION_REGISTRY_H_
#define PLACEMENT_SERVER_REGION_REGION_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/auth/caller.h"
#include "server/metrics/metrics.h"
#include "server/region/fd_passing_listener.h"
#include "server/region/process_exit_watcher.h"
#include "server/region/shared_memory_mapping.h"
#include "server/region/unsealed_shm_file.h"

namespace placement::server {

struct RegionRegistryOptions {
  // Regions registered at once, over all tenants; 0 = unlimited.
  int64_t max_regions = 1024;
  // Regions one tenant may have registered at once; 0 = unlimited.
  int64_t max_regions_per_tenant = 0;
  // Accept POSIX shm names (which cannot be sealed against shrinking; see
  // shared_memory_mapping.h) besides passed fds.
  bool allow_shm_names = false;
};

// Region names are labels for ListRegions.
inline constexpr size_t kMaxRegionNameLength = 128;

struct RegionSnapshot {
  std::string id;
  std::string name;
  int64_t size = 0;
  std::string tenant;
  std::string session_id;
  bool pinned = false;
  // The process that passed the fd (0 for shm names and unknown pids); a
  // region without a session is unregistered when it exits.
  int64_t owner_pid = 0;
  int64_t owner_uid = -1;
};

// How the caller names the memory to map.
struct RegionHandle {
  enum class Kind { kFdToken, kShmName };
  Kind kind = Kind::kFdToken;
  std::string value;
};

// Whether a transfer reads the region (uploads) or writes it (downloads);
// counted separately in the metrics.
enum class RegionAccess { kRead, kWrite };

class RegionRegistry;

// Bytes of a region held for one transfer. Move-only; the region stays
// mapped while this lives.
class RegionBytes {
 public:
  RegionBytes(RegionBytes&& other) noexcept;
  RegionBytes& operator=(RegionBytes&&) = delete;
  RegionBytes(const RegionBytes&) = delete;
  ~RegionBytes();

  int64_t size() const { return size_; }

  // Hands the slice's bytes to `sink`, in order: the mapping itself in one
  // piece for a sealed memfd; pieces of at most kRegionCopyPieceBytes read
  // with pread for an unsealed shm object. The first error (the sink's, or
  // FAILED_PRECONDITION when the shm object shrank) ends it.
  absl::Status ReadInto(absl::FunctionRef<absl::Status(absl::string_view)> sink) const;
  // Fills the slice: `fill(offset, length, dst)` must write bytes
  // [offset, offset + length) of the slice to `dst` -- the mapping itself for
  // a sealed memfd (one call), a bounce buffer written with pwrite for an
  // unsealed shm object (pieces of at most kRegionCopyPieceBytes).
  absl::Status WriteFrom(
      absl::FunctionRef<absl::Status(int64_t offset, int64_t length, char* dst)> fill) const;

 private:
  friend class RegionRegistry;
  struct Region;
  RegionBytes(std::shared_ptr<Region> region, int64_t offset, int64_t size)
      : region_(std::move(region)), offset_(offset), size_(size) {}

  std::shared_ptr<Region> region_;
  int64_t offset_;
  int64_t size_;
};

// The bounce-buffer piece for unsealed shm objects.
inline constexpr int64_t kRegionCopyPieceBytes = int64_t{1} << 20;

class RegionRegistry {
 public:
  // `fds` (nullable: fd passing off) and `metrics` (nullable) outlive the
  // registry.
  RegionRegistry(FdPassingListener* fds, Metrics* metrics, RegionRegistryOptions options);
  // Unmaps every region. REQUIRES: no transfer holds RegionBytes.
  ~RegionRegistry();
  RegionRegistry(const RegionRegistry&) = delete;
  RegionRegistry& operator=(const RegionRegistry&) = delete;

  using PinFn = std::function<absl::Status(void* data, int64_t size)>;
  using UnpinFn = std::function<void(void* data)>;
  // REQUIRES: called before the first Register.
  void set_pinning(PinFn pin, UnpinFn unpin);
  // Tells whether a session is still open; a region registered by a call
  // whose session ended meanwhile is unmapped again (FAILED_PRECONDITION).
  // REQUIRES: called before the first Register.
  void set_session_check(std::function<bool(const std::string&)> open);

  // Maps the memory and records it for `caller`. INVALID_ARGUMENT: a name too
  // long, an empty handle, or the mapping's own errors (SharedMemoryMapping,
  // UnsealedShmFile); NOT_FOUND: an unknown token or shm name;
  // RESOURCE_EXHAUSTED: max_regions or max_regions_per_tenant reached;
  // FAILED_PRECONDITION: fd passing is off, shm names not allowed or named
  // outside a session, the process that passed the fd already exited (for a
  // region outside a session), or the caller's session ended during the call.
  absl::StatusOr<RegionSnapshot> Register(const Caller& caller, std::string name,
                                          int64_t size_bytes, const RegionHandle& handle);
  // NOT_FOUND for an id the caller does not see. Waits for transfers using
  // the region, then unmaps it.
  absl::Status Unregister(const Caller& caller, const std::string& id);
  // The regions the caller sees, sorted by id.
  std::vector<RegionSnapshot> List(const Caller& caller) const;

  // Bytes [offset, offset + size) of region `id` for one transfer. `field`
  // names the RegionSlice in the request for error messages ("region",
  // "chunk.region", "destination"). NOT_FOUND (naming `field`.region_id) for
  // an id the caller does not see; the bounds errors of CheckRegionSlice.
  // With `used` >= 0 the whole slice is bounds-checked but the transfer gets
  // only its first `used` bytes (a download offered more room than it needs).
  absl::StatusOr<RegionBytes> Acquire(const Caller& caller, absl::string_view field,
                                      const std::string& id, int64_t offset, int64_t size,
                                      RegionAccess access, int64_t used = -1);

  // Unregisters every region of `session_id`; returns how many.
  int64_t EndSession(const std::string& session_id);
  // Unregisters region `id` because the process that passed its fd exited
  // (the process watcher's callback); false when it is gone already.
  bool ProcessExited(const std::string& id);

  int64_t size() const;
  // Regions of `tenant` registered now.
  int64_t size(const std::string& tenant) const;
  int64_t mapped_bytes() const;
  // The fd-passing socket clients use ("" when fd passing is off).
  std::string socket_address() const { return fds_ != nullptr ? fds_->address() : ""; }

 private:
  using Region = RegionBytes::Region;
  // Stops watching the region's process, waits for its transfers, unpins
  // and unmaps it.
  void Retire(const std::shared_ptr<Region>& region);
  // The memory a handle names, mapped or opened.
  struct Opened {
    std::unique_ptr<SharedMemoryMapping> mapping;
    std::unique_ptr<UnsealedShmFile> shm;
    std::shared_ptr<PeerProcess> depositor;
    // Outside a session: the depositor, ready to be watched.
    std::optional<WatchablePid> watchable;
  };
  absl::StatusOr<Opened> Open(const Caller& caller, int64_t size_bytes, const RegionHandle& handle);
  bool VisibleLocked(const Caller& caller, const Region& region) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CountFailure(absl::string_view op);
  // RESOURCE_EXHAUSTED when one more region would pass a limit.
  absl::Status CheckLimitsLocked(const std::string& tenant) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  FdPassingListener* const fds_;
  Metrics* const metrics_;
  // Null when epoll is unavailable (regions then live until unregistered).
  std::unique_ptr<ProcessExitWatcher> exits_;
  const RegionRegistryOptions options_;
  PinFn pin_;
  UnpinFn unpin_;
  std::function<bool(const std::string&)> session_open_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Region>> regions_ ABSL_GUARDED_BY(mu_);
  int64_t mapped_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen bitgen_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_REGION_REGISTRY_H_
