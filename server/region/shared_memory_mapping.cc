#include "server/region/shared_memory_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::server {
SharedMemoryMapping::~SharedMemoryMapping() {
  if (data_ != nullptr) munmap(data_, static_cast<size_t>(size_));
}

absl::StatusOr<std::unique_ptr<SharedMemoryMapping>> SharedMemoryMapping::MapFd(
    int fd, int64_t size_bytes) {
  if (size_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes must be >= 0, got ", size_bytes));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot fstat the region's fd: ", std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        "the region's fd is not shared memory (memfd_create or shm_open); got another file type");
  }
  const int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::InvalidArgumentError(
        "the region's memfd must be sealed with F_SEAL_SHRINK (memfd_create with "
        "MFD_ALLOW_SEALING, ftruncate, then fcntl(F_ADD_SEALS, F_SEAL_SHRINK)), so that it "
        "cannot shrink under the daemon");
  }
  // The size read after the seal: once the memory cannot shrink, it is at
  // most what stays mapped. (The size read before the seal was checked
  // would let a client shrink the file in between, then seal it, and the
  // daemon map -- and later touch -- pages past its end: SIGBUS.)
  if (fstat(fd, &st) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot fstat the region's fd: ", std::strerror(errno)));
  }
  const int64_t available = static_cast<int64_t>(st.st_size);
  if (available == 0) {
    return absl::InvalidArgumentError("the region's memory is empty (size 0); ftruncate it first");
  }
  if (size_bytes > available) {
    return absl::OutOfRangeError(absl::StrCat(
        "size_bytes ", size_bytes, " is larger than the region's memory (", available, " bytes)"));
  }
  const int64_t size = size_bytes == 0 ? available : size_bytes;
  void* data = mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const int error = errno;
    if (error == EPERM || error == EACCES) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the region's memory cannot be mapped writable (", std::strerror(error),
          "): it is sealed against writing (F_SEAL_WRITE) or opened read-only; the daemon writes "
          "downloads into regions"));
    }
    if (error == ENOMEM) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot map ", size, " bytes of the region: ", std::strerror(error)));
    }
    return absl::InternalError(
        absl::StrCat("cannot map ", size, " bytes of the region: ", std::strerror(error)));
  }
  return std::unique_ptr<SharedMemoryMapping>(
      new SharedMemoryMapping(static_cast<char*>(data), size));
}

}  // namespace placement::server
