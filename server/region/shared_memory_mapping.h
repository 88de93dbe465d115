// SharedMemoryMapping: the daemon's read-write view (mmap MAP_SHARED) of
// memory a same-host client created and passed over the fd-passing socket.
//
// A mapped file that its creator shrinks afterwards would make the daemon's
// next access fault (SIGBUS). So the fd must be a memfd sealed against
// shrinking (F_SEAL_SHRINK; the client library seals it). POSIX shm names,
// which cannot be sealed, are never mapped: unsealed_shm_file.h.
//
// Owns the mapping: destroying it unmaps. Thread-safe to read (the bytes are
// shared with another process; callers synchronize through the RPCs).
#ifndef PLACEMENT_SERVER_REGION_SHARED_MEMORY_MAPPING_H_
#define PLACEMENT_SERVER_REGION_SHARED_MEMORY_MAPPING_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace placement::server {

class SharedMemoryMapping {
 public:
  // Maps bytes [0, size_bytes) of `fd` (0 = its whole fstat size). Does not
  // take `fd` (the caller closes it; the mapping outlives it).
  // INVALID_ARGUMENT: not a regular file / memfd, empty, size_bytes < 0, or
  // a memfd not sealed with F_SEAL_SHRINK; OUT_OF_RANGE: size_bytes larger
  // than the memory; INTERNAL: mmap failed.
  static absl::StatusOr<std::unique_ptr<SharedMemoryMapping>> MapFd(int fd, int64_t size_bytes);

  ~SharedMemoryMapping();
  SharedMemoryMapping(const SharedMemoryMapping&) = delete;
  SharedMemoryMapping& operator=(const SharedMemoryMapping&) = delete;

  char* data() const { return data_; }
  int64_t size() const { return size_; }

 private:
  SharedMemoryMapping(char* data, int64_t size) : data_(data), size_(size) {}

  char* data_;
  int64_t size_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_SHARED_MEMORY_MAPPING_H_
