// OwnerQuota: device bytes held per tensor owner, with an optional ceiling
// (--max_tensor_bytes_per_owner). A Charge reserves bytes for one tensor and
// gives them back when it is destroyed, so a tensor's charge lives exactly as
// long as its device buffers (Tensor::quota_charge).
//
// Shared by the TensorStore and every outstanding charge (charges keep the
// quota alive). Thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_OWNER_QUOTA_H_
#define PLACEMENT_SERVER_TENSOR_OWNER_QUOTA_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace placement::server {

class OwnerQuota : public std::enable_shared_from_this<OwnerQuota> {
 public:
  // max_bytes_per_owner: 0 = unlimited (bytes are still counted). The empty
  // owner is an owner like any other.
  static std::shared_ptr<OwnerQuota> Create(int64_t max_bytes_per_owner);

  // Reserves `bytes` for `owner`; the returned handle releases them when the
  // last copy is destroyed. RESOURCE_EXHAUSTED when the ceiling would be
  // exceeded ("owner 'alice': cannot hold 4096 more bytes; 1024 of 2048 bytes
  // in use"); nothing is reserved then.
  absl::StatusOr<std::shared_ptr<void>> Charge(const std::string& owner, int64_t bytes);

  // Bytes currently charged to `owner`.
  int64_t BytesOf(const std::string& owner) const;

 private:
  explicit OwnerQuota(int64_t max_bytes_per_owner) : max_bytes_per_owner_(max_bytes_per_owner) {}
  void Release(const std::string& owner, int64_t bytes);

  const int64_t max_bytes_per_owner_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, int64_t> bytes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_OWNER_QUOTA_H_
