// RegionPool: the staging regions a Client reuses for TransferPath::kAuto
// (TensorClient uploads and downloads of caller memory, prefetch batches),
// and whether its daemon is on this host at all (asked once).
//
// One pool per Client, created on first use and released by ~Client (which
// unregisters its regions). Borrow hands out a free region of at least the
// requested size, creating one (rounded up to a MiB) when none is free; a
// returned region stays registered for the next transfer. At most
// kMaxFreeRegions and kMaxFreeBytes wait free (the largest are kept). Not installed.
//
// Thread-safe.
#ifndef PLACEMENT_CLIENT_SRC_REGION_POOL_H_
#define PLACEMENT_CLIENT_SRC_REGION_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "client/src/writable_mappings.h"
#include "placement/client/client.h"
#include "placement/client/regions.h"

namespace grpc {
class Channel;
}

namespace placement::client {

class RegionPool {
 public:
  static constexpr size_t kMaxFreeRegions = 8;
  // Bytes of free regions kept (beyond one region, which is always kept).
  static constexpr int64_t kMaxFreeBytes = int64_t{1} << 30;
  // Transfers smaller than this use the stream under kAuto: a region saves
  // nothing there.
  static constexpr int64_t kAutoMinBytes = int64_t{256} << 10;

  // A borrowed region, handed back to the pool on destruction.
  class Lease {
   public:
    Lease(RegionPool* pool, std::unique_ptr<SharedRegion> region)
        : pool_(pool), region_(std::move(region)) {}
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = default;
    ~Lease();
    const SharedRegion& region() const { return *region_; }

   private:
    RegionPool* pool_;
    std::unique_ptr<SharedRegion> region_;
  };

  // The pool of `client`. REQUIRES: the Client outlives every use (~Client
  // calls Release).
  static std::shared_ptr<RegionPool> For(const Client& client);
  // Drops the pool of `channel`'s Client (unregistering its regions).
  static void Release(const grpc::Channel* channel);

  // Whether `path` leads through a region for a transfer of `bytes`:
  // kStream never, kRegion always (FAILED_PRECONDITION when the daemon is
  // not on this host), kAuto when same-host and bytes >= kAutoMinBytes.
  absl::StatusOr<bool> UseRegion(TransferPath path, int64_t bytes);

  // The daemon's region socket when it is on this host (RegionClient::
  // SameHost), else ""; asked once. Errors are GetStatus's, not cached.
  absl::StatusOr<std::string> SameHostSocket();

  absl::StatusOr<Lease> Borrow(int64_t bytes);

  // The Client's mappings of daemon memory for uploads written in place
  // (tensors_inplace.h), kept across uploads up to kMaxWritableBytes.
  static constexpr int64_t kMaxWritableBytes = int64_t{2} << 30;
  WritableMappings& mappings() { return mappings_; }
  // Whether the daemon answered that it can never write in place
  // (UNIMPLEMENTED): kAuto then stops asking.
  bool in_place_declined() const { return in_place_declined_.load(); }
  void DeclineInPlace() { in_place_declined_.store(true); }

  explicit RegionPool(const Client& client) : client_(client), mappings_(kMaxWritableBytes) {}

 private:
  void Return(std::unique_ptr<SharedRegion> region);

  const Client& client_;
  WritableMappings mappings_;
  std::atomic<bool> in_place_declined_{false};
  absl::Mutex mu_;
  // SameHostSocket's answer, once known.
  std::optional<std::string> socket_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<SharedRegion>> free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_REGION_POOL_H_
