// PinnedHostRanges: the host memory ranges a backend registered for DMA
// (cudaHostRegister of same-host regions), so that a copy whose host side
// lies entirely inside one of them can skip the pinned staging buffers.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_DEVICE_PINNED_HOST_RANGES_H_
#define PLACEMENT_SERVER_DEVICE_PINNED_HOST_RANGES_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/device/device_backend.h"

namespace placement::server {

class PinnedHostRanges {
 public:
  // Which offsets of a ByteRun index the host buffer.
  enum class HostSide { kSource, kDestination };

  // REQUIRES: ranges do not overlap; size > 0.
  void Add(const void* data, int64_t size);
  // Returns the size registered at `data`, or 0 when none was.
  int64_t Remove(const void* data);
  // True when every run's host bytes (base + offset, length) lie inside one
  // registered range. False for an empty run list.
  bool Contains(const void* base, absl::Span<const ByteRun> runs, HostSide side) const;

 private:
  mutable absl::Mutex mu_;
  std::map<uintptr_t, int64_t> ranges_ ABSL_GUARDED_BY(mu_);  // start -> size
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_PINNED_HOST_RANGES_H_
