#include "server/tensor/tenant_quota.h"

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

std::string TenantName(const std::string& tenant) {
  return tenant.empty() ? std::string("(default)") : absl::StrCat("'", tenant, "'");
}

}  // namespace

int64_t PageRoundedBytes(int64_t bytes) {
  if (bytes <= 0) return kQuotaPageBytes;
  return (bytes + kQuotaPageBytes - 1) / kQuotaPageBytes * kQuotaPageBytes;
}

std::shared_ptr<TenantQuota> TenantQuota::Create(int64_t max_device_bytes, int64_t max_tensors) {
  return std::shared_ptr<TenantQuota>(new TenantQuota(max_device_bytes, max_tensors));
}

absl::StatusOr<std::shared_ptr<void>> TenantQuota::Charge(const std::string& tenant,
                                                          int64_t page_rounded_bytes) {
  {
    absl::MutexLock lock(&mu_);
    TenantUsage& usage = usage_[tenant];
    if (max_tensors_ > 0 && usage.tensors + 1 > max_tensors_) {
      const int64_t held = usage.tensors;
      if (usage.tensors == 0 && usage.device_bytes == 0) usage_.erase(tenant);
      return absl::ResourceExhaustedError(absl::StrCat("tenant ", TenantName(tenant), " holds ",
                                                       held, " of at most ", max_tensors_,
                                                       " tensors (--tenant_max_tensors)"));
    }
    if (max_device_bytes_ > 0 && usage.device_bytes + page_rounded_bytes > max_device_bytes_) {
      const int64_t held = usage.device_bytes;
      if (usage.tensors == 0 && usage.device_bytes == 0) usage_.erase(tenant);
      return absl::ResourceExhaustedError(
          absl::StrCat("tenant ", TenantName(tenant), ": cannot hold ", page_rounded_bytes,
                       " more device bytes (page-rounded); ", held, " of ", max_device_bytes_,
                       " bytes in use (--tenant_max_device_bytes)"));
    }
    usage.device_bytes += page_rounded_bytes;
    usage.tensors += 1;
  }
  std::shared_ptr<TenantQuota> self = shared_from_this();
  return std::shared_ptr<void>(nullptr, [self, tenant, page_rounded_bytes](void*) {
    self->Release(tenant, page_rounded_bytes);
  });
}

void TenantQuota::Release(const std::string& tenant, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(tenant);
  if (it == usage_.end()) return;
  it->second.device_bytes -= bytes;
  it->second.tensors -= 1;
  if (it->second.tensors <= 0 && it->second.device_bytes <= 0) usage_.erase(it);
}

TenantUsage TenantQuota::UsageOf(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = usage_.find(tenant);
  return it == usage_.end() ? TenantUsage{} : it->second;
}

std::vector<std::pair<std::string, TenantUsage>> TenantQuota::Usages() const {
  absl::MutexLock lock(&mu_);
  return {usage_.begin(), usage_.end()};
}

}  // namespace placement::server
