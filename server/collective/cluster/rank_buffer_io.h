// RankBufferIo: host access to the rank buffers of a collective for engines
// that move bytes through host memory (ClusterEngine's Gloo path). On a
// host-addressable backend (CPU virtual devices) buffers are used in place;
// otherwise bytes are staged with the backend's Read / Write.
//
// Thread-compatible; the backend is not owned and must outlive it.
#ifndef PLACEMENT_SERVER_COLLECTIVE_CLUSTER_RANK_BUFFER_IO_H_
#define PLACEMENT_SERVER_COLLECTIVE_CLUSTER_RANK_BUFFER_IO_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/device/device_backend.h"

namespace placement::server {

class RankBufferIo {
 public:
  explicit RankBufferIo(DeviceBackend* backend)
      : backend_(backend), direct_(backend->HostAddressable()) {}

  // `buffer`'s bytes readable on the host: the buffer itself, or a copy
  // read into `staging` (valid while `staging` lives and is not resized).
  absl::StatusOr<const std::byte*> View(const DeviceBuffer& buffer,
                                        std::vector<std::byte>& staging);

  // The buffer's own host memory on a host-addressable backend (null
  // otherwise): engines may work in it directly.
  std::byte* Direct(const DeviceBuffer& buffer) const {
    return direct_ ? static_cast<std::byte*>(buffer.data()) : nullptr;
  }
  // Copies `length` bytes at `offset` of `src` to `dst` on the host.
  absl::Status Read(const DeviceBuffer& src, int64_t offset, std::byte* dst, int64_t length);

  // Copies `runs` (src_offset into `src`, dst_offset into `dst`) to `dst`.
  // REQUIRES: every run lies inside both; `src` does not overlap `dst`.
  absl::Status Write(const std::byte* src, DeviceBuffer& dst, absl::Span<const ByteRun> runs);

 private:
  DeviceBackend* backend_;
  bool direct_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_CLUSTER_RANK_BUFFER_IO_H_
