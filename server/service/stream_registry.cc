#include "server/service/stream_registry.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/logging.h"

namespace placement::server {
namespace {

int64_t NowNs() { return absl::ToUnixNanos(absl::Now()); }

}  // namespace

absl::string_view StreamKindName(StreamKind kind) {
  switch (kind) {
    case StreamKind::kUpload:
      return "upload";
    case StreamKind::kUploadBatch:
      return "upload_batch";
    case StreamKind::kDownload:
      return "download";
    case StreamKind::kPrefetch:
      return "prefetch";
  }
  return "stream";
}

StreamRegistry::Lease::~Lease() { Reset(); }

StreamRegistry::Lease::Lease(Lease&& other) noexcept
    : registry_(other.registry_), id_(other.id_), activity_(std::move(other.activity_)) {
  other.registry_ = nullptr;
}

StreamRegistry::Lease& StreamRegistry::Lease::operator=(Lease&& other) noexcept {
  if (this != &other) {
    Reset();
    registry_ = other.registry_;
    id_ = other.id_;
    activity_ = std::move(other.activity_);
    other.registry_ = nullptr;
  }
  return *this;
}

void StreamRegistry::Lease::Reset() {
  if (registry_ != nullptr) registry_->Close(id_);
  registry_ = nullptr;
  activity_.reset();
}

void StreamRegistry::Lease::Progress(int64_t bytes) {
  if (activity_ == nullptr) return;
  activity_->last_progress_ns.store(NowNs(), std::memory_order_relaxed);
  if (bytes != 0) activity_->bytes.fetch_add(bytes, std::memory_order_relaxed);
}

void StreamRegistry::Lease::Describe(std::string what, int64_t total_bytes) {
  if (activity_ == nullptr) return;
  activity_->total_bytes.store(total_bytes, std::memory_order_relaxed);
  absl::MutexLock lock(&activity_->mu);
  activity_->what = std::move(what);
}

StreamRegistry::StreamRegistry(StreamLimits limits) : limits_(limits) {
  reaper_ = std::thread([this] { ReapLoop(); });
}

StreamRegistry::~StreamRegistry() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  reaper_.join();
}

absl::StatusOr<StreamRegistry::Lease> StreamRegistry::Open(const std::string& tenant,
                                                           StreamKind kind,
                                                           std::function<void()> cancel) {
  absl::MutexLock lock(&mu_);
  const int64_t total = static_cast<int64_t>(streams_.size());
  if (limits_.max_streams > 0 && total >= limits_.max_streams) {
    return absl::ResourceExhaustedError(
        absl::StrCat(total, " streams are open; the daemon allows at most ", limits_.max_streams,
                     " (--max_streams)"));
  }
  int64_t& mine = per_tenant_[tenant];
  if (limits_.max_streams_per_tenant > 0 && mine >= limits_.max_streams_per_tenant) {
    const int64_t held = mine;
    if (mine == 0) per_tenant_.erase(tenant);
    return absl::ResourceExhaustedError(absl::StrCat(
        "tenant ", tenant.empty() ? std::string("(default)") : absl::StrCat("'", tenant, "'"),
        " has ", held, " streams open; at most ", limits_.max_streams_per_tenant,
        " (--tenant_max_streams)"));
  }
  ++mine;
  const int64_t id = next_id_++;
  std::shared_ptr<CancelState> state;
  if (cancel) {
    state = std::make_shared<CancelState>();
    state->cancel = std::move(cancel);
  }
  auto activity = std::make_shared<Activity>();
  activity->last_progress_ns.store(NowNs());
  streams_[id] = Entry{tenant, kind, absl::Now(), std::move(state), activity};
  return Lease(this, id, std::move(activity));
}

void StreamRegistry::Close(int64_t id) {
  std::shared_ptr<CancelState> state;
  {
    absl::MutexLock lock(&mu_);
    auto it = streams_.find(id);
    if (it == streams_.end()) return;
    state = std::move(it->second.cancel);
    auto tenant = per_tenant_.find(it->second.tenant);
    if (tenant != per_tenant_.end() && --tenant->second <= 0) per_tenant_.erase(tenant);
    streams_.erase(it);
  }
  if (state == nullptr) return;
  // After this, the reaper never calls cancel: the stream's context may go.
  if (state->canceller.load() == std::this_thread::get_id()) {
    // Inside our own cancel (the reaper holds state->mu on this thread).
    state->mu.AssertHeld();
    state->closed = true;
    return;
  }
  absl::MutexLock lock(&state->mu);
  state->closed = true;
}

int64_t StreamRegistry::open_streams() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(streams_.size());
}

std::vector<StreamSnapshot> StreamRegistry::List() const {
  std::vector<std::pair<int64_t, Entry>> entries;
  {
    absl::MutexLock lock(&mu_);
    entries.assign(streams_.begin(), streams_.end());
  }
  std::sort(entries.begin(), entries.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<StreamSnapshot> out;
  out.reserve(entries.size());
  for (const auto& [id, entry] : entries) {
    StreamSnapshot s{id,
                     entry.kind,
                     entry.tenant,
                     "",
                     entry.activity->bytes.load(std::memory_order_relaxed),
                     entry.activity->total_bytes.load(std::memory_order_relaxed),
                     entry.opened};
    absl::MutexLock lock(&entry.activity->mu);
    s.what = entry.activity->what;
    out.push_back(std::move(s));
  }
  return out;
}

int64_t StreamRegistry::open_streams(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = per_tenant_.find(tenant);
  return it == per_tenant_.end() ? 0 : it->second;
}

void StreamRegistry::ReapLoop() {
  const absl::Duration period = std::min(absl::Seconds(1), limits_.idle_timeout / 4);
  for (;;) {
    std::vector<std::shared_ptr<CancelState>> stalled;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
      if (stopping_) return;
      const int64_t stale_before = NowNs() - absl::ToInt64Nanoseconds(limits_.idle_timeout);
      for (auto& [id, entry] : streams_) {
        if (entry.cancelled || entry.cancel == nullptr) continue;
        if (entry.activity->last_progress_ns.load(std::memory_order_relaxed) >= stale_before) {
          continue;
        }
        entry.cancelled = true;
        stalled.push_back(entry.cancel);
        LogWarning("stream ", id, " of tenant '", entry.tenant, "' made no progress for ",
                   absl::FormatDuration(limits_.idle_timeout), "; cancelling it");
      }
    }
    for (const auto& state : stalled) {
      absl::MutexLock lock(&state->mu);
      if (state->closed) continue;  // ended by itself meanwhile
      reaped_.fetch_add(1);
      state->canceller.store(std::this_thread::get_id());
      state->cancel();
      state->canceller.store(std::thread::id());
    }
  }
}

}  // namespace placement::server
