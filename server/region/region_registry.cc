#include "server/region/region_registry.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "server/logging.h"
#include "server/region/region_bounds.h"

namespace placement::server {

// One registered region: a sealed memfd's mapping, or an unsealed shm
// object read through its fd. `uses` counts live RegionBytes; the memory is
// released only once the region left the registry and `uses` is zero.
struct RegionBytes::Region {
  RegionSnapshot info;
  std::unique_ptr<SharedMemoryMapping> mapping;
  std::unique_ptr<UnsealedShmFile> shm;
  int64_t exit_watch = 0;  // ProcessExitWatcher key; 0 = none
  absl::Mutex mu;
  int64_t uses ABSL_GUARDED_BY(mu) = 0;
};

RegionBytes::RegionBytes(RegionBytes&& other) noexcept
    : region_(std::move(other.region_)), offset_(other.offset_), size_(other.size_) {
  other.offset_ = 0;
  other.size_ = 0;
}

absl::Status RegionBytes::ReadInto(absl::FunctionRef<absl::Status(absl::string_view)> sink) const {
  if (region_->mapping != nullptr) {
    return sink(absl::string_view(region_->mapping->data() + offset_, static_cast<size_t>(size_)));
  }
  std::string piece(static_cast<size_t>(std::min(size_, kRegionCopyPieceBytes)), '\0');
  for (int64_t done = 0; done < size_;) {
    const int64_t length = std::min(size_ - done, kRegionCopyPieceBytes);
    RETURN_IF_ERROR(region_->shm->Read(offset_ + done, length, piece.data()));
    RETURN_IF_ERROR(sink(absl::string_view(piece.data(), static_cast<size_t>(length))));
    done += length;
  }
  return absl::OkStatus();
}

absl::Status RegionBytes::WriteFrom(
    absl::FunctionRef<absl::Status(int64_t offset, int64_t length, char* dst)> fill) const {
  if (region_->mapping != nullptr) return fill(0, size_, region_->mapping->data() + offset_);
  std::string piece(static_cast<size_t>(std::min(size_, kRegionCopyPieceBytes)), '\0');
  for (int64_t done = 0; done < size_;) {
    const int64_t length = std::min(size_ - done, kRegionCopyPieceBytes);
    RETURN_IF_ERROR(fill(done, length, piece.data()));
    RETURN_IF_ERROR(region_->shm->Write(offset_ + done, length, piece.data()));
    done += length;
  }
  return absl::OkStatus();
}

RegionBytes::~RegionBytes() {
  if (region_ == nullptr) return;
  absl::MutexLock lock(&region_->mu);
  --region_->uses;
}

namespace {

absl::Status RegionNotFound(absl::string_view field, const std::string& id) {
  return absl::NotFoundError(absl::StrCat(field, "region_id '", id.substr(0, 80),
                                          "': no such region (unregistered, its session ended, "
                                          "or it belongs to another tenant or session)"));
}

}  // namespace

RegionRegistry::RegionRegistry(FdPassingListener* fds, Metrics* metrics,
                               RegionRegistryOptions options)
    : fds_(fds), metrics_(metrics), options_(options) {
  if (absl::StatusOr<std::unique_ptr<ProcessExitWatcher>> exits = ProcessExitWatcher::Create();
      exits.ok()) {
    exits_ = *std::move(exits);
  } else {
    LogWarning("regions: cannot watch client processes (", exits.status().message(),
               "); a region registered outside a session lives until it is unregistered");
  }
  if (metrics_ != nullptr) {
    metrics_->Describe("placementd_region_registrations_total", "counter",
                       "Shared-memory regions registered (RegionService).");
    metrics_->Describe("placementd_region_failures_total", "counter",
                       "Refused region registrations and region uses, by op.",
                       {{{"op", "register"}}, {{"op", "unregister"}}, {{"op", "use"}}});
    metrics_->Describe("placementd_region_bytes_total", "counter",
                       "Bytes moved through regions: direction=in (uploads read the region), "
                       "out (downloads write it).",
                       {{{"direction", "in"}}, {{"direction", "out"}}});
  }
}

RegionRegistry::~RegionRegistry() {
  // First, so that no exit callback runs into the registry being destroyed.
  exits_.reset();
  absl::flat_hash_map<std::string, std::shared_ptr<Region>> regions;
  {
    absl::MutexLock lock(&mu_);
    regions.swap(regions_);
    mapped_bytes_ = 0;
  }
  for (auto& [id, region] : regions) Retire(region);
}

void RegionRegistry::set_pinning(PinFn pin, UnpinFn unpin) {
  pin_ = std::move(pin);
  unpin_ = std::move(unpin);
}

void RegionRegistry::set_session_check(std::function<bool(const std::string&)> open) {
  session_open_ = std::move(open);
}

void RegionRegistry::CountFailure(absl::string_view op) {
  if (metrics_ != nullptr) {
    metrics_->Increment("placementd_region_failures_total", {{"op", std::string(op)}});
  }
}

absl::StatusOr<RegionRegistry::Opened> RegionRegistry::Open(const Caller& caller,
                                                            int64_t size_bytes,
                                                            const RegionHandle& handle) {
  Opened opened;
  switch (handle.kind) {
    case RegionHandle::Kind::kFdToken: {
      if (handle.value.empty()) {
        return absl::InvalidArgumentError(
            "a RegisterRegionRequest needs a handle: fd_token (preferred) or shm_name");
      }
      if (fds_ == nullptr) {
        return absl::FailedPreconditionError(
            "fd passing is off on this daemon (--region_socket is empty); use shm_name");
      }
      // Checked before the token is used up: a refused claim can be retried.
      ASSIGN_OR_RETURN(opened.depositor, fds_->DepositorOf(handle.value));
      if (caller.session_id.empty()) {
        // Outside a session the region lives as long as the process that
        // passed its fd: that process must be alive, and watchable.
        constexpr absl::string_view kLifetime =
            "a region registered outside a session lives only as long as that process -- "
            "register it within a session (placement-session metadata) to outlive it";
        if (opened.depositor->Exited()) {
          return absl::FailedPreconditionError(
              absl::StrCat("the process that passed the region's fd (",
                           opened.depositor->Describe(), ") has exited; ", kLifetime));
        }
        absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*opened.depositor);
        if (!watchable.ok()) {
          return absl::Status(watchable.status().code(),
                              absl::StrCat("the process that passed the region's fd: ",
                                           watchable.status().message(), "; ", kLifetime));
        }
        opened.watchable = *std::move(watchable);
      }
      ASSIGN_OR_RETURN(ClaimedFd claimed, fds_->TakeFd(handle.value));
      absl::Cleanup close_fd = [fd = claimed.fd] { close(fd); };
      ASSIGN_OR_RETURN(opened.mapping, SharedMemoryMapping::MapFd(claimed.fd, size_bytes));
      return opened;
    }
    case RegionHandle::Kind::kShmName: {
      if (!options_.allow_shm_names) {
        return absl::FailedPreconditionError(
            "shm_name regions are off on this daemon (--allow_shm_regions); pass the fd over "
            "the region socket (fd_token)");
      }
      if (caller.session_id.empty()) {
        return absl::FailedPreconditionError(
            "a shm_name region must be registered within a session (placement-session "
            "metadata): no process is known to hold it, so only the session's end can free it");
      }
      ASSIGN_OR_RETURN(opened.shm, UnsealedShmFile::Open(handle.value, size_bytes));
      return opened;
    }
  }
  return absl::InvalidArgumentError("unknown region handle kind");
}

absl::StatusOr<RegionSnapshot> RegionRegistry::Register(const Caller& caller, std::string name,
                                                        int64_t size_bytes,
                                                        const RegionHandle& handle) {
  absl::StatusOr<RegionSnapshot> result = [&]() -> absl::StatusOr<RegionSnapshot> {
    if (name.size() > kMaxRegionNameLength) {
      return absl::InvalidArgumentError(
          absl::StrCat("name is ", name.size(), " bytes long; at most ", kMaxRegionNameLength));
    }
    if (size_bytes < 0) {
      return absl::InvalidArgumentError(absl::StrCat("size_bytes must be >= 0, got ", size_bytes));
    }
    {
      absl::MutexLock lock(&mu_);
      RETURN_IF_ERROR(CheckLimitsLocked(caller.tenant));
    }
    ASSIGN_OR_RETURN(Opened opened, Open(caller, size_bytes, handle));
    auto region = std::make_shared<Region>();
    region->info.name = std::move(name);
    region->info.size = opened.mapping != nullptr ? opened.mapping->size() : opened.shm->size();
    region->info.tenant = caller.tenant;
    region->info.session_id = caller.session_id;
    if (opened.depositor != nullptr) {
      region->info.owner_pid = opened.depositor->pid();
      region->info.owner_uid = opened.depositor->uid();
    }
    if (pin_ && opened.mapping != nullptr) {
      // Pinning is an optimization: without it the backend stages the copy.
      region->info.pinned = pin_(opened.mapping->data(), opened.mapping->size()).ok();
    }
    region->mapping = std::move(opened.mapping);
    region->shm = std::move(opened.shm);
    absl::Status limits;
    std::string id;
    {
      absl::MutexLock lock(&mu_);
      limits = CheckLimitsLocked(caller.tenant);
      if (limits.ok()) {
        region->info.id = absl::StrFormat("r-%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                                          absl::Uniform<uint64_t>(bitgen_));
        id = region->info.id;
        regions_[id] = region;
        mapped_bytes_ += region->info.size;
        // Outside a session the region lives as long as the process that
        // passed its fd. (Watched under mu_, so a removal of the region
        // always finds its watch key.)
        if (opened.watchable.has_value() && exits_ != nullptr) {
          region->exit_watch =
              exits_->Watch(*std::move(opened.watchable), [this, id] { ProcessExited(id); });
        }
      }
    }
    if (!limits.ok()) {
      Retire(region);
      return limits;
    }
    if (!caller.session_id.empty() && session_open_ && !session_open_(caller.session_id)) {
      EndSession(caller.session_id);
      return absl::FailedPreconditionError(absl::StrCat(
          "session '", caller.session_id, "' ended while the region was registered; unmapped"));
    }
    return region->info;
  }();
  if (!result.ok()) {
    CountFailure("register");
  } else if (metrics_ != nullptr) {
    metrics_->Increment("placementd_region_registrations_total");
  }
  return result;
}

bool RegionRegistry::ProcessExited(const std::string& id) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end()) return false;
    region = std::move(it->second);
    regions_.erase(it);
    mapped_bytes_ -= region->info.size;
    region->exit_watch = 0;  // the watch fired: nothing to cancel
  }
  LogInfo("region ", id, " unregistered: the process that passed its fd (pid ",
          region->info.owner_pid, ") exited");
  Retire(region);
  return true;
}

absl::Status RegionRegistry::CheckLimitsLocked(const std::string& tenant) const {
  if (options_.max_regions > 0 && static_cast<int64_t>(regions_.size()) >= options_.max_regions) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot register a region: ", regions_.size(),
                                                     " of --max_regions=", options_.max_regions,
                                                     " are registered; unregister some first"));
  }
  if (options_.max_regions_per_tenant > 0) {
    int64_t mine = 0;
    for (const auto& [id, region] : regions_) mine += region->info.tenant == tenant ? 1 : 0;
    if (mine >= options_.max_regions_per_tenant) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot register a region: the tenant has ", mine, " of --tenant_max_regions=",
          options_.max_regions_per_tenant, " registered; unregister some first"));
    }
  }
  return absl::OkStatus();
}

bool RegionRegistry::VisibleLocked(const Caller& caller, const Region& region) const {
  if (caller.admin()) return true;
  return caller.Sees(region.info.tenant) &&
         (region.info.session_id.empty() || region.info.session_id == caller.session_id);
}

absl::Status RegionRegistry::Unregister(const Caller& caller, const std::string& id) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end() || !VisibleLocked(caller, *it->second)) {
      CountFailure("unregister");
      return RegionNotFound("", id);
    }
    region = std::move(it->second);
    regions_.erase(it);
    mapped_bytes_ -= region->info.size;
  }
  Retire(region);
  return absl::OkStatus();
}

void RegionRegistry::Retire(const std::shared_ptr<Region>& region) {
  if (region->exit_watch != 0 && exits_ != nullptr) exits_->Cancel(region->exit_watch);
  {
    absl::MutexLock lock(&region->mu);
    region->mu.Await(absl::Condition(
        +[](int64_t* uses) { return *uses == 0; }, &region->uses));
  }
  if (region->info.pinned && unpin_) unpin_(region->mapping->data());
  region->mapping.reset();
  region->shm.reset();
}

std::vector<RegionSnapshot> RegionRegistry::List(const Caller& caller) const {
  std::vector<RegionSnapshot> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, region] : regions_) {
      if (VisibleLocked(caller, *region)) out.push_back(region->info);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RegionSnapshot& a, const RegionSnapshot& b) { return a.id < b.id; });
  return out;
}

absl::StatusOr<RegionBytes> RegionRegistry::Acquire(const Caller& caller, absl::string_view field,
                                                    const std::string& id, int64_t offset,
                                                    int64_t size, RegionAccess access,
                                                    int64_t used) {
  std::shared_ptr<Region> region;
  {
    absl::MutexLock lock(&mu_);
    auto it = regions_.find(id);
    if (it == regions_.end() || !VisibleLocked(caller, *it->second)) {
      CountFailure("use");
      return RegionNotFound(field.empty() ? "" : absl::StrCat(field, "."), id);
    }
    region = it->second;
    if (absl::Status bounds = CheckRegionSlice(field, id, region->info.size, offset, size);
        !bounds.ok()) {
      CountFailure("use");
      return bounds;
    }
    if (used >= 0) size = std::min(size, used);
    // Counted under mu_: Unregister erases under mu_ before waiting, so no
    // use can start after it began waiting.
    absl::MutexLock region_lock(&region->mu);
    ++region->uses;
  }
  if (metrics_ != nullptr) {
    metrics_->Add("placementd_region_bytes_total",
                  {{"direction", access == RegionAccess::kRead ? "in" : "out"}},
                  static_cast<double>(size));
  }
  return RegionBytes(std::move(region), offset, size);
}

int64_t RegionRegistry::EndSession(const std::string& session_id) {
  std::vector<std::shared_ptr<Region>> ended;
  {
    absl::MutexLock lock(&mu_);
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (it->second->info.session_id == session_id) {
        mapped_bytes_ -= it->second->info.size;
        ended.push_back(std::move(it->second));
        regions_.erase(it++);
      } else {
        ++it;
      }
    }
  }
  for (const auto& region : ended) Retire(region);
  return static_cast<int64_t>(ended.size());
}

int64_t RegionRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(regions_.size());
}

int64_t RegionRegistry::size(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  int64_t n = 0;
  for (const auto& [id, region] : regions_) n += region->info.tenant == tenant ? 1 : 0;
  return n;
}

int64_t RegionRegistry::mapped_bytes() const {
  absl::MutexLock lock(&mu_);
  return mapped_bytes_;
}

}  // namespace placement::server
