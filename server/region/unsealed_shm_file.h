// UnsealedShmFile: a POSIX shared-memory object (shm_open) that a region
// names with shm_name (--allow_shm_regions), read and written with pread and
// pwrite on its fd instead of through a mapping.
//
// Why no mapping: such memory cannot be sealed against shrinking, so its
// creator may truncate it at any moment; a mapped access past the new end
// faults (SIGBUS) and would kill the daemon for every client. pread past the
// end returns fewer bytes instead, so a shrunk region fails the one transfer
// (FAILED_PRECONDITION naming the sizes) and the daemon goes on. The cost is
// one more copy (through a bounce buffer of at most kCopyPieceBytes), which
// the fd-passing path (sealed memfds, mapped) does not pay.
//
// Owns the fd. Thread-safe (pread/pwrite at explicit offsets).
#ifndef PLACEMENT_SERVER_REGION_UNSEALED_SHM_FILE_H_
#define PLACEMENT_SERVER_REGION_UNSEALED_SHM_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placement::server {

class UnsealedShmFile {
 public:
  // shm_open(name, O_RDWR). INVALID_ARGUMENT for a malformed name, a
  // negative size or an empty object; NOT_FOUND when it does not exist;
  // PERMISSION_DENIED when it cannot be opened; OUT_OF_RANGE for a
  // size_bytes larger than the object (0 = its whole size).
  static absl::StatusOr<std::unique_ptr<UnsealedShmFile>> Open(const std::string& name,
                                                               int64_t size_bytes);
  ~UnsealedShmFile();
  UnsealedShmFile(const UnsealedShmFile&) = delete;
  UnsealedShmFile& operator=(const UnsealedShmFile&) = delete;

  // The size registered (the object may have shrunk since).
  int64_t size() const { return size_; }

  // Bytes [offset, offset + length) of the object. FAILED_PRECONDITION when
  // the object shrank below offset + length; INTERNAL for other I/O errors.
  // REQUIRES: the range lies within size().
  absl::Status Read(int64_t offset, int64_t length, char* dst) const;
  // Writes them. FAILED_PRECONDITION when the object shrank below
  // offset + length before the write (a shrink during it grows the object
  // back, harmlessly, rather than faulting).
  absl::Status Write(int64_t offset, int64_t length, const char* src) const;

 private:
  UnsealedShmFile(std::string name, int fd, int64_t size)
      : name_(std::move(name)), fd_(fd), size_(size) {}
  absl::Status Shrunk(int64_t needed) const;

  const std::string name_;
  const int fd_;
  const int64_t size_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_UNSEALED_SHM_FILE_H_
