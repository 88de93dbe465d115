#include "server/region/unsealed_shm_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::server {

absl::StatusOr<std::unique_ptr<UnsealedShmFile>> UnsealedShmFile::Open(const std::string& name,
                                                                       int64_t size_bytes) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return absl::InvalidArgumentError(
        absl::StrCat("shm_name must be '/' followed by 1 to 254 characters without '/', got '",
                     name.substr(0, 64), "'"));
  }
  if (size_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat("size_bytes must be >= 0, got ", size_bytes));
  }
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("shm_name '", name, "': no such shared memory"));
    }
    return absl::PermissionDeniedError(
        absl::StrCat("shm_name '", name, "': cannot open: ", std::strerror(errno)));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat("shm_name '", name, "' is not shared memory"));
  }
  const int64_t available = static_cast<int64_t>(st.st_size);
  if (available == 0) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("shm_name '", name, "' is empty (size 0); ftruncate it first"));
  }
  if (size_bytes > available) {
    close(fd);
    return absl::OutOfRangeError(absl::StrCat(
        "size_bytes ", size_bytes, " is larger than the region's memory (", available, " bytes)"));
  }
  return std::unique_ptr<UnsealedShmFile>(
      new UnsealedShmFile(name, fd, size_bytes == 0 ? available : size_bytes));
}

UnsealedShmFile::~UnsealedShmFile() { close(fd_); }

absl::Status UnsealedShmFile::Shrunk(int64_t needed) const {
  struct stat st {};
  const int64_t now = fstat(fd_, &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
  return absl::FailedPreconditionError(
      absl::StrCat("shm_name '", name_, "' shrank to ", now,
                   " bytes under the transfer, which needs ", needed, " (registered with ", size_,
                   "); shm_name memory cannot be sealed -- pass a sealed memfd "
                   "over the region socket instead"));
}

absl::Status UnsealedShmFile::Read(int64_t offset, int64_t length, char* dst) const {
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd_, dst + done, static_cast<size_t>(length - done),
                            static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InternalError(
          absl::StrCat("shm_name '", name_, "': read failed: ", std::strerror(errno)));
    }
    if (n == 0) return Shrunk(offset + length);
    done += n;
  }
  return absl::OkStatus();
}

absl::Status UnsealedShmFile::Write(int64_t offset, int64_t length, const char* src) const {
  struct stat st {};
  if (fstat(fd_, &st) != 0 || static_cast<int64_t>(st.st_size) < offset + length) {
    return Shrunk(offset + length);
  }
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = pwrite(fd_, src + done, static_cast<size_t>(length - done),
                             static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::InternalError(
          absl::StrCat("shm_name '", name_, "': write failed: ", std::strerror(errno)));
    }
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace placement::server
