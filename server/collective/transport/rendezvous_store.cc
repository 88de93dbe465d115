#include "server/collective/transport/rendezvous_store.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
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
