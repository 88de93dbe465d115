// TenantQuota: what each tenant holds -- device bytes as the allocator spends
// them (every shard buffer rounded up to a 4 KiB page) and tensor count --
// with optional ceilings (--tenant_max_device_bytes, --tenant_max_tensors).
// A Charge covers one tensor and gives its bytes and count back when the last
// copy of the handle is destroyed (it lives in Tensor::quota_charge, so
// exactly as long as the tensor's buffers).
//
// Counted for every tenant, including the implicit "" of an unauthenticated
// daemon. Shared by the TensorStore and every outstanding charge.
// Thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_TENANT_QUOTA_H_
#define PLACEMENT_SERVER_TENSOR_TENANT_QUOTA_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

inline constexpr int64_t kQuotaPageBytes = 4096;

// `bytes` rounded up to a whole number of kQuotaPageBytes pages; an empty
// buffer still costs a page (it is an allocation like any other).
int64_t PageRoundedBytes(int64_t bytes);

struct TenantUsage {
  int64_t device_bytes = 0;  // page-rounded
  int64_t tensors = 0;
};

class TenantQuota : public std::enable_shared_from_this<TenantQuota> {
 public:
  // 0 = unlimited for either ceiling (still counted).
  static std::shared_ptr<TenantQuota> Create(int64_t max_device_bytes, int64_t max_tensors);

  // Reserves `page_rounded_bytes` and one tensor for `tenant`.
  // RESOURCE_EXHAUSTED naming the tenant, the ceiling and the use when
  // either ceiling would be passed; nothing is reserved then.
  absl::StatusOr<std::shared_ptr<void>> Charge(const std::string& tenant,
                                               int64_t page_rounded_bytes);

  TenantUsage UsageOf(const std::string& tenant) const;
  // Every tenant that holds something now, in no particular order.
  std::vector<std::pair<std::string, TenantUsage>> Usages() const;

 private:
  TenantQuota(int64_t max_device_bytes, int64_t max_tensors)
      : max_device_bytes_(max_device_bytes), max_tensors_(max_tensors) {}
  void Release(const std::string& tenant, int64_t bytes);

  const int64_t max_device_bytes_;
  const int64_t max_tensors_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, TenantUsage> usage_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENANT_QUOTA_H_
