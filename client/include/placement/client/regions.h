// Same-host shared-memory regions (placement.v1.RegionService,
// docs/api/regions.md): memory this process shares with a daemon on the same
// machine, so tensor bytes move at memory speed instead of through gRPC.
//
//   auto region = SharedRegion::Create(*client, 64 << 20);
//   std::memcpy(region->data(), x.data(), bytes);        // or fill in place
//   TensorClient(*client).UploadFromRegion(**region, 0, DType::kF32, {1024, 16384});
//
// TensorClient and the prefetch iterator use regions by themselves when the
// daemon is on this host (TransferPath::kAuto); these types are for callers
// that want to fill or read the shared memory in place (zero copies on the
// client side).
//
// RegionClient holds a reference to the Client, which must outlive it; it is
// thread-safe. A SharedRegion's memory may be used from any thread; the
// caller orders its own accesses against the transfers it starts.
#ifndef PLACEMENT_CLIENT_REGIONS_H_
#define PLACEMENT_CLIENT_REGIONS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "placement/client/client.h"

namespace placement::client {

// A registered region as the daemon describes it (ListRegions).
struct RegionInfo {
  std::string id;  // "r-" and 32 hex digits
  std::string name;
  int64_t size_bytes = 0;
  std::string session_id;  // empty = lives until unregistered or the daemon stops
  std::string tenant;
  bool pinned = false;  // registered with the GPU for DMA (CUDA backend)

  bool operator==(const RegionInfo&) const = default;
};

// Which way tensor bytes travel between this process and the daemon.
enum class TransferPath {
  kAuto,    // a region when the daemon is on this host, else the gRPC stream
  kStream,  // always gRPC chunks
  kRegion,  // always a region; FAILED_PRECONDITION when the daemon is remote
  // Upload written straight into the daemon's memory and Download of the
  // whole array read straight out of it, one copy (docs/api/views.md
  // "Writing in place", "Reading to copy"); FAILED_PRECONDITION when the
  // daemon is remote or cannot (a GPU platform; for uploads a shard under
  // 256 KiB). kAuto takes this path for same-host transfers of 1 MiB or
  // more where the daemon can. Batches, UploadFrom, selections and
  // prefetch take kRegion's path.
  kInPlace,
};

class RegionClient {
 public:
  explicit RegionClient(const Client& client) : client_(client) {}

  // Whether regions can reach the daemon: its GetStatus host_id and boot_id
  // equal this machine's, it reports a region socket, and the target is a
  // unix socket or a loopback address. Errors are GetStatus's.
  absl::StatusOr<bool> SameHost() const;

  // Passes `fd` (a memfd sealed with F_SEAL_SHRINK) over the daemon's region
  // socket and registers `size_bytes` of it (0 = all). The fd stays the
  // caller's. UNAVAILABLE when the region socket cannot be reached; the
  // daemon's codes otherwise (region_service.proto).
  absl::StatusOr<RegionInfo> RegisterFd(int fd, int64_t size_bytes,
                                        const std::string& name = "") const;
  // Registers a POSIX shared memory object by name (the daemon must run with
  // --allow_shm_regions).
  absl::StatusOr<RegionInfo> RegisterShmName(const std::string& shm_name, int64_t size_bytes,
                                             const std::string& name = "") const;
  absl::Status Unregister(const std::string& region_id) const;
  absl::StatusOr<std::vector<RegionInfo>> List() const;

 private:
  const Client& client_;
};

// Shared memory created by this process (a sealed memfd), mapped here and
// registered with the daemon. Destroying it unregisters (the daemon first
// finishes transfers using it) and unmaps, through the Client it was made
// with, which must outlive it.
class SharedRegion {
 public:
  // FAILED_PRECONDITION when the daemon is not on this host
  // (RegionClient::SameHost); INVALID_ARGUMENT for size_bytes < 1;
  // RESOURCE_EXHAUSTED when the memory cannot be created; the daemon's codes
  // otherwise.
  static absl::StatusOr<std::unique_ptr<SharedRegion>> Create(const Client& client,
                                                              int64_t size_bytes,
                                                              const std::string& name = "");
  ~SharedRegion();
  SharedRegion(const SharedRegion&) = delete;
  SharedRegion& operator=(const SharedRegion&) = delete;

  const std::string& id() const { return info_.id; }
  const RegionInfo& info() const { return info_; }
  uint8_t* data() const { return data_; }
  int64_t size() const { return size_; }
  absl::Span<uint8_t> bytes() const { return {data_, static_cast<size_t>(size_)}; }

  // Unregisters now (idempotent); the memory stays mapped here until
  // destruction.
  absl::Status Unregister();

 private:
  SharedRegion(const Client& client, uint8_t* data, int64_t size, RegionInfo info)
      : client_(client), data_(data), size_(size), info_(std::move(info)) {}

  const Client& client_;
  uint8_t* data_;
  int64_t size_;
  RegionInfo info_;
  bool registered_ = true;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_REGIONS_H_
