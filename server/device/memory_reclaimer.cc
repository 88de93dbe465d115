#include "server/device/memory_reclaimer.h"

#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {
namespace {

constexpr char kReleased[] = "placementd_memory_released_bytes_total";

}  // namespace

int64_t ResidentBytesOfSelf() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  if (!(statm >> size >> resident)) return -1;
  return resident * sysconf(_SC_PAGESIZE);
}

MemoryReclaimer::MemoryReclaimer(DeviceBackend* backend, Metrics* metrics, ReclaimerOptions options)
    : backend_(backend),
      metrics_(metrics),
      options_(std::move(options)),
      min_available_(options_.min_available_bytes > 0
                         ? options_.min_available_bytes
                         : std::max<int64_t>(0, MeminfoBytes("MemTotal:") / 16)),
      tick_(std::clamp(options_.cache_idle / 4, absl::Milliseconds(50), absl::Seconds(1))) {
  if (metrics_ != nullptr) {
    metrics_->Describe(kReleased, "counter",
                       "Host and device memory the daemon gave back: reason=idle (cached blocks "
                       "unused for --device_cache_idle), pressure (MemAvailable below "
                       "--host_memory_min_available), admin (DaemonService.TrimMemory).");
    for (const char* reason : {"idle", "pressure", "admin"}) {
      metrics_->Add(kReleased, {{"reason", reason}}, 0);
    }
  }
  thread_ = std::thread([this] { Loop(); });
}

MemoryReclaimer::~MemoryReclaimer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

int64_t MemoryReclaimer::MeminfoBytes(const char* key) const {
  std::ifstream meminfo(options_.meminfo);
  std::string line;
  while (std::getline(meminfo, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, key)) continue;
    rest = absl::StripAsciiWhitespace(rest);
    absl::ConsumeSuffix(&rest, " kB");
    int64_t kib = 0;
    return absl::SimpleAtoi(rest, &kib) ? kib * 1024 : -1;
  }
  return -1;
}

void MemoryReclaimer::Count(const char* reason, int64_t bytes) {
  if (metrics_ != nullptr && bytes > 0) {
    metrics_->Add(kReleased, {{"reason", reason}}, static_cast<double>(bytes));
  }
}

TrimResult MemoryReclaimer::TrimNow(std::optional<MemoryOwnerTag> owner) {
  TrimResult result;
  result.resident_bytes_before = ResidentBytesOfSelf();
  result.cache_bytes_released = owner ? backend_->ReleaseCachedOf(*owner)
                                      : backend_->ReleaseCachedBefore(absl::InfiniteFuture());
  malloc_trim(0);
  result.resident_bytes_after = ResidentBytesOfSelf();
  Count("admin", result.cache_bytes_released);
  {
    absl::MutexLock lock(&mu_);
    released_at_trim_ = backend_->ReleasedBuffers();
  }
  return result;
}

void MemoryReclaimer::Tick(absl::Time now) {
  const int64_t released = backend_->ReleasedBuffers();
  const int64_t idle = backend_->ReleaseCachedBefore(now - options_.cache_idle);
  Count("idle", idle);
  const int64_t available = MeminfoBytes("MemAvailable:");
  const bool pressure = available >= 0 && available < min_available_;
  int64_t pressed = 0;
  if (pressure) {
    pressed = backend_->ReleaseCachedBefore(absl::InfiniteFuture());
    Count("pressure", pressed);
  }
  bool trim = false;
  {
    absl::MutexLock lock(&mu_);
    if (pressure != under_pressure_) {
      if (pressure) {
        LogWarning("host memory is low (MemAvailable ", available, " bytes < ", min_available_,
                   "): releasing every cached device block while it lasts");
      } else {
        LogInfo("host memory recovered (MemAvailable ", available, " bytes)");
      }
      under_pressure_ = pressure;
    }
    // Trim once the releases stopped for a tick (or under pressure).
    const bool settled = released == released_at_tick_;
    released_at_tick_ = released;
    if ((released != released_at_trim_ && settled) || pressed > 0 || idle > 0) {
      trim = true;
      released_at_trim_ = released;
    }
  }
  if (trim) malloc_trim(0);
}

void MemoryReclaimer::Loop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), tick_);
    if (stopping_) break;
    mu_.Unlock();
    Tick(absl::Now());
    mu_.Lock();
  }
}

}  // namespace placement::server
