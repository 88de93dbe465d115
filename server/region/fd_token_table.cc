#include "server/region/fd_token_table.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace placement::server {

FdTokenTable::~FdTokenTable() {
  absl::MutexLock lock(&mu_);
  for (auto& [token, pending] : pending_) close(pending.fd);
}

void FdTokenTable::ForgetLocked(const Pending& pending) {
  const PeerProcess& depositor = *pending.depositor;
  if (depositor.pid_known() && --per_process_[depositor.pid()] == 0) {
    per_process_.erase(depositor.pid());
  }
  if (--per_uid_[depositor.uid()] == 0) per_uid_.erase(depositor.uid());
}

absl::Time FdTokenTable::SweepLocked(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second.expire <= now) {
      close(it->second.fd);
      ForgetLocked(it->second);
      pending_.erase(it++);
    } else {
      next = std::min(next, it->second.expire);
      ++it;
    }
  }
  return next;
}

absl::Time FdTokenTable::Sweep(absl::Time now) {
  absl::MutexLock lock(&mu_);
  return SweepLocked(now);
}

absl::StatusOr<std::string> FdTokenTable::Deposit(int fd, std::shared_ptr<PeerProcess> depositor) {
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  SweepLocked(now);
  const auto count = [](const auto& map, auto key) {
    auto it = map.find(key);
    return it == map.end() ? int64_t{0} : it->second;
  };
  std::string refusal;
  const std::string ttl = absl::FormatDuration(limits_.ttl);
  if (depositor->pid_known() && count(per_process_, depositor->pid()) >= limits_.max_per_process) {
    refusal = absl::StrCat(depositor->Describe(), " already has ", limits_.max_per_process,
                           " unclaimed fds (the per-process bound); claim them with "
                           "RegisterRegion or let them expire (",
                           ttl, ")");
  } else if (count(per_uid_, depositor->uid()) >= limits_.max_per_uid) {
    refusal = absl::StrCat("uid ", depositor->uid(), " already has ", limits_.max_per_uid,
                           " unclaimed fds (the per-uid bound); claim them with RegisterRegion "
                           "or let them expire (",
                           ttl, ")");
  } else if (static_cast<int64_t>(pending_.size()) >= limits_.max_total) {
    refusal = absl::StrCat("the daemon holds ", limits_.max_total,
                           " unclaimed fds (its bound); try again once some are claimed or "
                           "expired (",
                           ttl, ")");
  }
  if (!refusal.empty()) {
    close(fd);
    return absl::ResourceExhaustedError(refusal);
  }
  std::string token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                                      absl::Uniform<uint64_t>(bitgen_));
  if (depositor->pid_known()) ++per_process_[depositor->pid()];
  ++per_uid_[depositor->uid()];
  pending_[token] = Pending{fd, now + limits_.ttl, std::move(depositor)};
  return token;
}

namespace {

absl::Status UnknownToken(const std::string& token, const std::string& where) {
  return absl::NotFoundError(absl::StrCat("fd_token '", token.substr(0, 64),
                                          "' is unknown, expired or already used; pass the fd "
                                          "again on ",
                                          where));
}

}  // namespace

absl::StatusOr<std::shared_ptr<PeerProcess>> FdTokenTable::DepositorOf(
    const std::string& token, const std::string& where) const {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(token);
  if (it == pending_.end() || it->second.expire <= absl::Now()) {
    return UnknownToken(token, where);
  }
  return it->second.depositor;
}

absl::StatusOr<ClaimedFd> FdTokenTable::Take(const std::string& token, const std::string& where) {
  absl::MutexLock lock(&mu_);
  SweepLocked(absl::Now());
  auto it = pending_.find(token);
  if (it == pending_.end()) return UnknownToken(token, where);
  ClaimedFd claimed{it->second.fd, it->second.depositor};
  ForgetLocked(it->second);
  pending_.erase(it);
  return claimed;
}

int64_t FdTokenTable::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(pending_.size());
}

}  // namespace placement::server
