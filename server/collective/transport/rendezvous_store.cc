#include "server/collective/transport/rendezvous_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace placement::server {
namespace {

absl::Status DeadlineFor(const std::string& key, absl::Duration timeout) {
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous: key '", key, "' not published within ", absl::FormatDuration(timeout)));
}

}  // namespace

absl::Status InMemoryRendezvousStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key must not be empty");
  absl::MutexLock lock(&mu_);
  values_[key] = value;
  return absl::OkStatus();
}

absl::StatusOr<std::string> InMemoryRendezvousStore::Get(const std::string& key,
                                                         absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto present = [this, &key]()
                     ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return values_.count(key) > 0; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&present), timeout)) return DeadlineFor(key, timeout);
  return values_[key];
}

absl::StatusOr<int64_t> InMemoryRendezvousStore::DeletePrefix(const std::string& prefix) {
  absl::MutexLock lock(&mu_);
  int64_t deleted = 0;
  for (auto it = values_.lower_bound(prefix);
       it != values_.end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    it = values_.erase(it);
    ++deleted;
  }
  return deleted;
}

size_t InMemoryRendezvousStore::size() const {
  absl::MutexLock lock(&mu_);
  return values_.size();
}

absl::StatusOr<int64_t> FileRendezvousStore::DeletePrefix(const std::string& prefix) {
  // Escaping maps each character on its own, so the files of the keys
  // under `prefix` are those whose path starts with PathFor(prefix).
  const std::string stem = PathFor(prefix);
  int64_t deleted = 0;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(directory_, error)) {
    const std::string path = entry.path().string();
    if (path.compare(0, stem.size(), stem) != 0) continue;
    if (std::filesystem::remove(entry.path(), error)) ++deleted;
  }
  if (error) {
    return absl::UnavailableError(
        absl::StrCat("rendezvous directory ", directory_, ": ", error.message()));
  }
  return deleted;
}

std::string FileRendezvousStore::PathFor(const std::string& key) const {
  std::string name;
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '.' || c == '-') {
      name.push_back(static_cast<char>(c));
    } else {
      absl::StrAppendFormat(&name, "%%%02X", c);
    }
  }
  return absl::StrCat(directory_, "/", name);
}

absl::Status FileRendezvousStore::Set(const std::string& key, const std::string& value) {
  if (key.empty()) return absl::InvalidArgumentError("rendezvous key must not be empty");
  const std::string path = PathFor(key);
  const std::string tmp =
      absl::StrCat(path, ".tmp.", ::getpid(), ".", absl::ToUnixNanos(absl::Now()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(value.data(), static_cast<std::streamsize>(value.size()));
    out.close();
    if (!out) {
      return absl::UnavailableError(
          absl::StrCat("rendezvous: cannot write ", tmp, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    return absl::UnavailableError(
        absl::StrCat("rendezvous: cannot rename ", tmp, " to ", path, ": ", std::strerror(err)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileRendezvousStore::Get(const std::string& key,
                                                     absl::Duration timeout) {
  const std::string path = PathFor(key);
  const absl::Time deadline = absl::Now() + timeout;
  absl::Duration backoff = absl::Milliseconds(1);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream contents;
      contents << in.rdbuf();
      return contents.str();
    }
    const absl::Time now = absl::Now();
    if (now >= deadline) return DeadlineFor(key, timeout);
    absl::SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

}  // namespace placement::server
