// RegionRegistry: the shared-memory regions same-host clients registered
// (RegionService), and the only way the transfer paths reach their bytes.
//
// Ownership. A region belongs to the tenant of the call that registered it
// and to that call's session, if any. A region is visible to a caller of the
// same tenant whose call joined the same session -- or any call of the
// tenant when the region has no session; admins see every region. Invisible
// regions look exactly like unknown ids (NOT_FOUND). A region is unmapped on
// Unregister, when its session ends (EndSession, wired to SessionManager),
// and when the registry is destroyed (the daemon stops).
//
// Transfers. Acquire bounds-checks one slice (region_bounds.h) and returns
// RegionBytes, which keeps the region mapped while it lives. Unregister
// removes the region at once (later Acquires fail NOT_FOUND), then waits for
// the RegionBytes alive at that moment -- copies at memory speed -- before
// unmapping, so a transfer never touches unmapped memory and the client may
// reuse its memory as soon as Unregister returns.
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
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/auth/caller.h"
#include "server/metrics/metrics.h"
#include "server/region/fd_passing_listener.h"
#include "server/region/shared_memory_mapping.h"

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

  char* data() const { return data_; }
  int64_t size() const { return size_; }
  absl::string_view view() const { return absl::string_view(data_, static_cast<size_t>(size_)); }

 private:
  friend class RegionRegistry;
  struct Region;
  RegionBytes(std::shared_ptr<Region> region, char* data, int64_t size)
      : region_(std::move(region)), data_(data), size_(size) {}

  std::shared_ptr<Region> region_;
  char* data_;
  int64_t size_;
};

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
  // long, an empty handle, shm names not allowed, or the mapping's own errors
  // (SharedMemoryMapping); NOT_FOUND: an unknown token or shm name;
  // RESOURCE_EXHAUSTED: max_regions or max_regions_per_tenant reached; FAILED_PRECONDITION: fd
  // passing is off, or the caller's session ended during the call.
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
  absl::StatusOr<RegionBytes> Acquire(const Caller& caller, absl::string_view field,
                                      const std::string& id, int64_t offset, int64_t size,
                                      RegionAccess access);

  // Unregisters every region of `session_id`; returns how many.
  int64_t EndSession(const std::string& session_id);

  int64_t size() const;
  int64_t mapped_bytes() const;
  // The fd-passing socket clients use ("" when fd passing is off).
  std::string socket_address() const { return fds_ != nullptr ? fds_->address() : ""; }

 private:
  using Region = RegionBytes::Region;
  // Waits for the region's transfers, unpins and unmaps it.
  void Retire(const std::shared_ptr<Region>& region);
  bool VisibleLocked(const Caller& caller, const Region& region) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CountFailure(absl::string_view op);
  // RESOURCE_EXHAUSTED when one more region would pass a limit.
  absl::Status CheckLimitsLocked(const std::string& tenant) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  FdPassingListener* const fds_;
  Metrics* const metrics_;
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
