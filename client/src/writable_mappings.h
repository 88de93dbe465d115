// WritableMappings: a Client's read-write mappings of the daemon memory
// files that uploads written in place hand out (docs/api/views.md "Writing
// in place"), kept across uploads and keyed by the file (st_dev, st_ino).
// The daemon gives a tenant's freed block back to its next reservation of
// that size, so keeping the mapping turns the next upload into a copy into
// pages already mapped: a fresh mmap of 256 MiB costs several times the
// copy itself in page-table work.
//
// Bounded: past `max_bytes` mapped, the least recently used mappings are
// dropped from the cache (unmapped once no upload still writes through
// them). Not installed. Thread-safe.
#ifndef PLACEMENT_CLIENT_SRC_WRITABLE_MAPPINGS_H_
#define PLACEMENT_CLIENT_SRC_WRITABLE_MAPPINGS_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace placement::client {

class WritableMappings {
 public:
  // One mapping of a whole memory file; unmapped when the last holder goes.
  class Mapping {
   public:
    Mapping(std::byte* base, int64_t length) : base_(base), length_(length) {}
    ~Mapping();
    Mapping(const Mapping&) = delete;
    Mapping& operator=(const Mapping&) = delete;
    std::byte* base() const { return base_; }
    int64_t length() const { return length_; }

   private:
    friend class WritableMappings;
    std::byte* base_;
    int64_t length_;
    // Whether every page of the file is mapped here. Not for a file mapped
    // while it had no pages (FillFreshFile maps only part of it): the next
    // Map of it maps the rest.
    std::atomic<bool> complete_{false};
  };

  explicit WritableMappings(int64_t max_bytes) : max_bytes_(max_bytes) {}
  WritableMappings(const WritableMappings&) = delete;
  WritableMappings& operator=(const WritableMappings&) = delete;

  // The mapping of the file `fd` refers to (`file_bytes` long), made now
  // (PROT_READ | PROT_WRITE, MAP_SHARED) unless one is cached, with the
  // file's pages mapped in at once (PopulateMapping) -- unless the file has
  // none yet (FileHasNoPages: the caller fills it, FillFreshFile). `fd` stays
  // the caller's. INVALID_ARGUMENT when the file is shorter than
  // `file_bytes`; PERMISSION_DENIED when it cannot be mapped writable (a
  // file sealed meanwhile: map it read-only instead); INTERNAL otherwise.
  absl::StatusOr<std::shared_ptr<Mapping>> Map(int fd, int64_t file_bytes);

  // Uploads that found their file mapped already, and mapped bytes now.
  int64_t hits() const;
  int64_t mapped_bytes() const;

 private:
  using Key = std::pair<dev_t, ino_t>;
  struct Entry {
    Key key;
    std::shared_ptr<Mapping> mapping;
  };

  // The cached mapping of `key` (moved to the front), or null.
  std::shared_ptr<Mapping> CachedLocked(const Key& key, int64_t file_bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int64_t max_bytes_;
  mutable absl::Mutex mu_;
  std::list<Entry> entries_ ABSL_GUARDED_BY(mu_);  // most recently used first
  int64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_WRITABLE_MAPPINGS_H_
