#include "tools/placectl/npy_mapping.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace placement::placectl {

absl::StatusOr<std::unique_ptr<MappedNpy>> MappedNpy::Open(const std::string& path) {
  // NpyReader checks the header and that the size matches it.
  absl::StatusOr<std::unique_ptr<NpyReader>> reader = NpyReader::Open(path);
  if (!reader.ok()) return reader.status();
  NpyHeader header = (*reader)->header();
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < header.data_bytes) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("cannot stat ", path, " or it changed size"));
  }
  const size_t length = static_cast<size_t>(st.st_size);
  void* base = nullptr;
  if (length > 0) {
    base = ::mmap(nullptr, length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return absl::InternalError(absl::StrCat("cannot map ", path, ": ", std::strerror(err)));
    }
  }
  ::close(fd);
  const auto* bytes = static_cast<const uint8_t*>(base);
  absl::Span<const uint8_t> data(bytes + (length - static_cast<size_t>(header.data_bytes)),
                                 static_cast<size_t>(header.data_bytes));
  return std::unique_ptr<MappedNpy>(new MappedNpy(std::move(header), base, length, data));
}

MappedNpy::~MappedNpy() {
  if (base_ != nullptr) ::munmap(base_, length_);
}

}  // namespace placement::placectl
