#include "client/src/writable_mappings.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "client/src/parallel_copy.h"

namespace placement::client {

WritableMappings::Mapping::~Mapping() { munmap(base_, static_cast<size_t>(length_)); }

absl::StatusOr<std::shared_ptr<WritableMappings::Mapping>> WritableMappings::Map(
    int fd, int64_t file_bytes) {
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("fstat of a handed-out fd: ", std::strerror(errno)));
  }
  if (st.st_size < file_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("the daemon's memory file holds ", st.st_size, " bytes, not ", file_bytes));
  }
  const Key key{st.st_dev, st.st_ino};
  // A file with no pages yet is filled by the caller (FillFreshFile);
  // mapping it in first would allocate every page zeroed.
  const bool empty = st.st_blocks == 0;
  std::shared_ptr<Mapping> hit;
  {
    absl::MutexLock lock(&mu_);
    hit = CachedLocked(key, file_bytes);
  }
  if (hit != nullptr) {
    // A fill mapped only part of it here.
    if (!empty && !hit->complete_.exchange(true)) {
      PopulateMapping(hit->base(), static_cast<size_t>(hit->length()));
    }
    return hit;
  }
  void* base =
      mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    const std::string message =
        absl::StrCat("cannot map ", file_bytes, " bytes of daemon memory: ", std::strerror(error));
    return error == EPERM || error == EACCES ? absl::PermissionDeniedError(message)
                                             : absl::InternalError(message);
  }
  // Written (or read) whole next: its pages mapped in at once, not faulted
  // one by one.
  if (!empty) PopulateMapping(base, static_cast<size_t>(file_bytes));
  auto mapping = std::make_shared<Mapping>(static_cast<std::byte*>(base), file_bytes);
  mapping->complete_ = !empty;
  std::list<Entry> dropped;  // unmapped outside the lock
  absl::MutexLock lock(&mu_);
  // Another transfer may have mapped the same file meanwhile: keep one.
  if (std::shared_ptr<Mapping> other = CachedLocked(key, file_bytes)) return other;
  entries_.push_front({key, mapping});
  bytes_ += file_bytes;
  while (bytes_ > max_bytes_ && entries_.size() > 1) {
    bytes_ -= entries_.back().mapping->length();
    dropped.splice(dropped.begin(), entries_, std::prev(entries_.end()));
  }
  return mapping;
}

std::shared_ptr<WritableMappings::Mapping> WritableMappings::CachedLocked(const Key& key,
                                                                          int64_t file_bytes) {
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->key == key && it->mapping->length() >= file_bytes) {
      entries_.splice(entries_.begin(), entries_, it);
      ++hits_;
      return entries_.front().mapping;
    }
  }
  return nullptr;
}

int64_t WritableMappings::hits() const {
  absl::MutexLock lock(&mu_);
  return hits_;
}

int64_t WritableMappings::mapped_bytes() const {
  absl::MutexLock lock(&mu_);
  return bytes_;
}

}  // namespace placement::client
