#include "server/device/pinned_host_ranges.h"

#include <algorithm>

namespace placement::server {

void PinnedHostRanges::Add(const void* data, int64_t size) {
  absl::MutexLock lock(&mu_);
  ranges_[reinterpret_cast<uintptr_t>(data)] = size;
}

int64_t PinnedHostRanges::Remove(const void* data) {
  absl::MutexLock lock(&mu_);
  auto it = ranges_.find(reinterpret_cast<uintptr_t>(data));
  if (it == ranges_.end()) return 0;
  const int64_t size = it->second;
  ranges_.erase(it);
  return size;
}

bool PinnedHostRanges::Contains(const void* base, absl::Span<const ByteRun> runs,
                                HostSide side) const {
  if (runs.empty()) return false;
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (const ByteRun& r : runs) {
    const int64_t offset = side == HostSide::kSource ? r.src_offset : r.dst_offset;
    lo = std::min(lo, offset);
    hi = std::max(hi, offset + r.length);
  }
  const uintptr_t begin = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(lo);
  const uintptr_t end = reinterpret_cast<uintptr_t>(base) + static_cast<uintptr_t>(hi);
  absl::MutexLock lock(&mu_);
  auto it = ranges_.upper_bound(begin);
  if (it == ranges_.begin()) return false;
  --it;
  return begin >= it->first && end <= it->first + static_cast<uintptr_t>(it->second);
}

}  // namespace placement::server
