#include "server/ready_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace placement::server {
namespace {

std::string TempPath(const std::string& path) { return absl::StrCat(path, ".tmp.", getpid()); }

// Why `path` cannot be written: its directory is missing or not a
// directory, or the system's own reason.
std::string Reason(const std::string& path, int error) {
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    return absl::StrCat("the directory ", dir.string(), " does not exist");
  }
  if (!dir.empty() && !std::filesystem::is_directory(dir, ec)) {
    return absl::StrCat(dir.string(), " is not a directory");
  }
  return std::strerror(error);
}

absl::Status CannotWrite(const std::string& path, int error) {
  return absl::FailedPreconditionError(
      absl::StrCat("cannot write --ready_file=", path, ": ", Reason(path, error)));
}

}  // namespace

absl::Status CheckReadyFile(const std::string& path) {
  if (path.empty()) return absl::OkStatus();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot write --ready_file=", path, ": it is a directory"));
  }
  const std::string tmp = TempPath(path);
  std::FILE* probe = std::fopen(tmp.c_str(), "w");
  if (probe == nullptr) return CannotWrite(path, errno);
  std::fclose(probe);
  std::remove(tmp.c_str());
  return absl::OkStatus();
}

absl::Status WriteReadyFile(const std::string& path, const ReadyFileContents& contents) {
  const std::string tmp = TempPath(path);
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out.is_open()) return CannotWrite(path, errno);
    out << contents.address << "\n";
    if (!contents.metrics_url.empty()) out << "metrics=" << contents.metrics_url << "\n";
    if (!contents.peer_address.empty()) out << "peer=" << contents.peer_address << "\n";
    out.flush();
    if (!out.good()) return CannotWrite(path, errno);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return CannotWrite(path, error);
  }
  return absl::OkStatus();
}

}  // namespace placement::server
