#include "server/auth/served_tls_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/auth/tls_key_pair.h"
#include "server/logging.h"

namespace placement::server {
namespace {

constexpr const char* kFailures = "placementd_tls_reload_failures_total";
constexpr const char* kReloads = "placementd_tls_reloads_total";
// Key material is small; anything larger is not a PEM bundle we serve.
constexpr int64_t kMaxFileBytes = 1 << 20;

absl::StatusOr<std::string> ReadSmallFile(absl::string_view flag, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, "='", path, "' cannot be read: ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string contents = std::move(text).str();
  if (static_cast<int64_t>(contents.size()) > kMaxFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, "='", path, "' is ", contents.size(),
                                                   " bytes; at most ", kMaxFileBytes));
  }
  return contents;
}

// A private directory for the copies: memory-backed when /dev/shm is usable,
// so the key never reaches a disk.
absl::StatusOr<std::string> MakePrivateDir() {
  std::vector<std::string> parents = {"/dev/shm"};
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0') {
    parents.push_back(tmp);
  }
  parents.push_back("/tmp");
  for (const std::string& parent : parents) {
    std::string pattern = absl::StrCat(parent, "/placementd-tls-XXXXXX");
    if (mkdtemp(pattern.data()) != nullptr) return pattern;
  }
  return absl::InternalError(absl::StrCat(
      "cannot make a private directory for the served TLS files under /dev/shm, $TMPDIR or /tmp: ",
      std::strerror(errno)));
}

absl::Status WriteFile(const std::string& path, const std::string& contents, int64_t mtime) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = errno;
      close(fd);
      return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(error)));
    }
    done += static_cast<size_t>(n);
  }
  const timespec times[2] = {{mtime, 0}, {mtime, 0}};
  (void)futimens(fd, times);
  close(fd);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedTlsFiles>> ServedTlsFiles::Create(
    const TransportSecurityConfig& config, Metrics* metrics) {
  ASSIGN_OR_RETURN(std::string dir, MakePrivateDir());
  std::unique_ptr<ServedTlsFiles> files(new ServedTlsFiles(config, dir, metrics));
  ASSIGN_OR_RETURN(Contents contents, files->ReadSource());
  RETURN_IF_ERROR(files->Check(contents));
  {
    absl::MutexLock lock(&files->mu_);
    RETURN_IF_ERROR(files->PublishLocked(contents));
  }
  if (metrics != nullptr) {
    metrics->Describe(kFailures, "counter",
                      "TLS certificate/key/CA files that changed but were refused (did not "
                      "parse, or key and certificate do not match); the previous ones stay "
                      "served.");
    metrics->Describe(kReloads, "counter", "New TLS certificate/key/CA files served since start.");
    metrics->Add(kFailures, {}, 0);
    metrics->Add(kReloads, {}, 0);
  }
  files->watcher_ = std::thread([raw = files.get()] { raw->WatchLoop(); });
  return files;
}

ServedTlsFiles::ServedTlsFiles(TransportSecurityConfig source, std::string dir, Metrics* metrics)
    : source_(std::move(source)),
      dir_(std::move(dir)),
      metrics_(metrics),
      base_mtime_(absl::ToUnixSeconds(absl::Now())) {
  served_ = source_;
  served_.tls_cert = dir_ + "/current/cert.pem";
  served_.tls_key = dir_ + "/current/key.pem";
  if (source_.mutual_tls()) served_.tls_client_ca = dir_ + "/current/ca.pem";
}

ServedTlsFiles::~ServedTlsFiles() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

int64_t ServedTlsFiles::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

absl::StatusOr<ServedTlsFiles::Contents> ServedTlsFiles::ReadSource() const {
  Contents contents;
  ASSIGN_OR_RETURN(contents.cert, ReadSmallFile("--tls_cert", source_.tls_cert));
  ASSIGN_OR_RETURN(contents.key, ReadSmallFile("--tls_key", source_.tls_key));
  if (source_.mutual_tls()) {
    ASSIGN_OR_RETURN(contents.ca, ReadSmallFile("--tls_client_ca", source_.tls_client_ca));
  }
  return contents;
}

absl::Status ServedTlsFiles::Check(const Contents& contents) const {
  RETURN_IF_ERROR(CheckKeyCertPair(contents.cert, contents.key,
                                   absl::StrCat("--tls_cert=", source_.tls_cert),
                                   absl::StrCat("--tls_key=", source_.tls_key)));
  if (source_.mutual_tls()) {
    RETURN_IF_ERROR(
        CheckCaBundle(contents.ca, absl::StrCat("--tls_client_ca=", source_.tls_client_ca)));
  }
  return absl::OkStatus();
}

absl::Status ServedTlsFiles::PublishLocked(const Contents& contents) {
  const int64_t next = generation_ + 1;
  const std::string gen = absl::StrCat("gen-", next);
  const std::string gen_dir = absl::StrCat(dir_, "/", gen);
  if (mkdir(gen_dir.c_str(), 0700) != 0) {
    return absl::InternalError(absl::StrCat("cannot make ", gen_dir, ": ", std::strerror(errno)));
  }
  const int64_t mtime = base_mtime_ + next;
  RETURN_IF_ERROR(WriteFile(gen_dir + "/cert.pem", contents.cert, mtime));
  RETURN_IF_ERROR(WriteFile(gen_dir + "/key.pem", contents.key, mtime));
  if (source_.mutual_tls()) RETURN_IF_ERROR(WriteFile(gen_dir + "/ca.pem", contents.ca, mtime));
  const std::string link = dir_ + "/current.new";
  unlink(link.c_str());
  if (symlink(gen.c_str(), link.c_str()) != 0 ||
      std::rename(link.c_str(), (dir_ + "/current").c_str()) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot publish ", gen_dir, ": ", std::strerror(errno)));
  }
  if (next > 2) {
    std::error_code ignored;
    std::filesystem::remove_all(absl::StrCat(dir_, "/gen-", next - 2), ignored);
  }
  generation_ = next;
  published_ = contents;
  return absl::OkStatus();
}

absl::Status ServedTlsFiles::Refresh() {
  absl::StatusOr<Contents> contents = ReadSource();
  absl::MutexLock lock(&mu_);
  absl::Status status = contents.status();
  std::string fingerprint;
  if (contents.ok()) {
    if (*contents == published_) {
      last_refused_.clear();
      return absl::OkStatus();
    }
    status = Check(*contents);
    if (status.ok()) status = PublishLocked(*contents);
    if (status.ok()) {
      LogInfo("TLS: serving the new certificate from --tls_cert=", source_.tls_cert, " (set ",
              generation_, "; gRPC picks it up within --tls_refresh_interval)");
      if (metrics_ != nullptr) metrics_->Increment(kReloads);
      last_refused_.clear();
      return status;
    }
    fingerprint = absl::StrCat(contents->cert, "\n--\n", contents->key, "\n--\n", contents->ca);
  } else {
    fingerprint = absl::StrCat("unreadable: ", status.message());
  }
  // Count and log each refused state of the files once, not at every check.
  if (fingerprint == last_refused_) return status;
  last_refused_ = std::move(fingerprint);
  LogError("TLS: refusing the changed TLS files, still serving set ", generation_, ": ",
           status.message());
  if (metrics_ != nullptr) metrics_->Increment(kFailures);
  return status;
}

void ServedTlsFiles::WatchLoop() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), source_.refresh_interval);
    if (stopping_) break;
    mu_.Unlock();
    (void)Refresh();
    mu_.Lock();
  }
}

}  // namespace placement::server
