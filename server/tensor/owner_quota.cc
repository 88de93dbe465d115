#include "server/tensor/owner_quota.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

// Gives `bytes` back to the quota on destruction.
class ChargeHandle {
 public:
  explicit ChargeHandle(std::function<void()> release) : release_(std::move(release)) {}
  ~ChargeHandle() { release_(); }
  ChargeHandle(const ChargeHandle&) = delete;
  ChargeHandle& operator=(const ChargeHandle&) = delete;

 private:
  std::function<void()> release_;
};

}  // namespace

std::shared_ptr<OwnerQuota> OwnerQuota::Create(int64_t max_bytes_per_owner) {
  return std::shared_ptr<OwnerQuota>(new OwnerQuota(max_bytes_per_owner));
}

absl::StatusOr<std::shared_ptr<void>> OwnerQuota::Charge(const std::string& owner, int64_t bytes) {
  {
    absl::MutexLock lock(&mu_);
    int64_t& held = bytes_[owner];
    if (max_bytes_per_owner_ > 0 && held + bytes > max_bytes_per_owner_) {
      const int64_t in_use = held;
      if (held == 0) bytes_.erase(owner);
      return absl::ResourceExhaustedError(
          absl::StrCat("owner '", owner, "': cannot hold ", bytes, " more bytes; ", in_use, " of ",
                       max_bytes_per_owner_, " bytes in use (--max_tensor_bytes_per_owner)"));
    }
    held += bytes;
  }
  std::shared_ptr<OwnerQuota> self = shared_from_this();
  return std::shared_ptr<void>(
      std::make_shared<ChargeHandle>([self, owner, bytes] { self->Release(owner, bytes); }));
}

int64_t OwnerQuota::BytesOf(const std::string& owner) const {
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(owner);
  return it == bytes_.end() ? 0 : it->second;
}

void OwnerQuota::Release(const std::string& owner, int64_t bytes) {
  absl::MutexLock lock(&mu_);
  auto it = bytes_.find(owner);
  if (it == bytes_.end()) return;
  it->second -= bytes;
  if (it->second <= 0) bytes_.erase(it);
}

}  // namespace placement::server
