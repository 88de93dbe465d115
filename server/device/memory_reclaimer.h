// MemoryReclaimer: gives the host memory the daemon no longer uses back to
// the system, on a background thread:
//   - idle cache: cached device blocks nobody reused for `cache_idle` are
//     freed (like jemalloc's decay), so a daemon that goes quiet after a
//     burst returns to its baseline instead of keeping the cache for good;
//   - pressure: when the host's MemAvailable (/proc/meminfo) drops below
//     `min_available_bytes`, every cached block is freed at once;
//   - malloc's free memory: once buffers were released and the daemon then
//     went a tick without releasing more, malloc_trim returns the free pages
//     of malloc's arenas (tensor records, gRPC buffers); under steady churn
//     it waits, so the trim never fights a busy loop.
// TrimNow does all of it at once (DaemonService.TrimMemory), or frees one
// owner's cached blocks (a tenant's TrimMemory) and malloc's free pages.
//
// Counts what it frees in placementd_memory_released_bytes_total{reason}
// (idle, pressure, admin).
//
// Thread-safe. The backend and metrics (nullable) outlive the reclaimer; the
// destructor stops the thread.
#ifndef PLACEMENT_SERVER_DEVICE_MEMORY_RECLAIMER_H_
#define PLACEMENT_SERVER_DEVICE_MEMORY_RECLAIMER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/device/device_backend.h"
#include "server/metrics/metrics.h"

namespace placement::server {

struct ReclaimerOptions {
  // Cached blocks unused this long are freed (--device_cache_idle).
  absl::Duration cache_idle = absl::Seconds(10);
  // Below this much MemAvailable every cached block is freed
  // (--host_memory_min_available); 0 = 1/16 of the host's memory.
  int64_t min_available_bytes = 0;
  // Where MemAvailable and MemTotal are read.
  std::string meminfo = "/proc/meminfo";
};

// What TrimNow did.
struct TrimResult {
  int64_t cache_bytes_released = 0;
  int64_t resident_bytes_before = 0;  // the daemon's RSS (/proc/self/statm)
  int64_t resident_bytes_after = 0;
};

class MemoryReclaimer {
 public:
  MemoryReclaimer(DeviceBackend* backend, Metrics* metrics, ReclaimerOptions options);
  ~MemoryReclaimer();
  MemoryReclaimer(const MemoryReclaimer&) = delete;
  MemoryReclaimer& operator=(const MemoryReclaimer&) = delete;

  // Frees every cached block -- or only `owner`'s -- and malloc's free pages
  // now.
  TrimResult TrimNow(std::optional<MemoryOwnerTag> owner = std::nullopt);
  // One round of the background work at `now` (the thread calls it every
  // tick); exposed for tests.
  void Tick(absl::Time now);

  // The MemAvailable threshold in effect.
  int64_t min_available_bytes() const { return min_available_; }
  // The tick: a quarter of cache_idle, between 50 ms and 1 s.
  absl::Duration tick() const { return tick_; }

 private:
  // "MemAvailable:" / "MemTotal:" of options_.meminfo in bytes, or -1.
  int64_t MeminfoBytes(const char* key) const;
  void Count(const char* reason, int64_t bytes);
  void Loop();

  DeviceBackend* const backend_;
  Metrics* const metrics_;
  const ReclaimerOptions options_;
  const int64_t min_available_;
  const absl::Duration tick_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // Released-buffer counts at the last trim and at the last tick.
  int64_t released_at_trim_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t released_at_tick_ ABSL_GUARDED_BY(mu_) = 0;
  bool under_pressure_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// The resident set of this process in bytes (/proc/self/statm), or -1.
int64_t ResidentBytesOfSelf();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_MEMORY_RECLAIMER_H_
