#include "server/view/upload_reservations.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/logging.h"

namespace placement::server {

struct UploadReservations::Record {
  std::string id;
  std::string tenant;
  std::string token;  // empty once redeemed
  absl::Time expires;
  int64_t bytes = 0;
  std::unique_ptr<UploadSession> upload;
  std::vector<std::unique_ptr<ShardExport>> slots;  // hold the fds until redeemed
  int64_t exit_watch = 0;
};

namespace {

absl::Status ReservationNotFound(const std::string& id) {
  return absl::NotFoundError(
      absl::StrCat("reservation_id '", id.substr(0, 80),
                   "': no such upload reservation (committed, cancelled, expired, its writer "
                   "exited, or it belongs to another tenant)"));
}

}  // namespace

UploadReservations::UploadReservations(DeviceBackend* backend, bool fd_passing,
                                       UploadReservationOptions options)
    : backend_(backend), fd_passing_(fd_passing), options_(options) {
  if (absl::StatusOr<std::unique_ptr<ProcessExitWatcher>> exits = ProcessExitWatcher::Create();
      exits.ok()) {
    exits_ = *std::move(exits);
  } else {
    LogWarning("in-place uploads: cannot watch writer processes (", exits.status().message(),
               "); a reservation ends only with its commit, cancel or expiry");
  }
  expirer_ = std::make_unique<ExpiryThread>([this](absl::Time now) { return Expire(now); });
}

UploadReservations::~UploadReservations() {
  expirer_.reset();
  exits_.reset();  // before the records go: no exit callback runs into them
  absl::flat_hash_map<std::string, std::unique_ptr<Record>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(open_);
    tokens_.clear();
    open_bytes_ = 0;
  }
  for (auto& [id, record] : all) {
    record->exit_watch = 0;
    Drop(std::move(record));
  }
}

absl::Status UploadReservations::CheckRoom(const Caller& caller) const {
  if (!fd_passing_) {
    return absl::FailedPreconditionError(
        "writing in place needs the region socket, which this daemon runs without "
        "(--region_socket ''); upload through the stream");
  }
  absl::MutexLock lock(&mu_);
  return CheckRoomLocked(caller.tenant);
}

absl::Status UploadReservations::CheckRoomLocked(const std::string& tenant) const {
  if (options_.max_open > 0 && static_cast<int64_t>(open_.size()) >= options_.max_open) {
    return absl::ResourceExhaustedError(absl::StrCat(
        open_.size(), " upload reservations are open, the bound (--max_upload_reservations=",
        options_.max_open, "); commit or cancel some first"));
  }
  auto it = per_tenant_.find(tenant);
  const int64_t mine = it == per_tenant_.end() ? 0 : it->second;
  if (options_.max_open_per_tenant > 0 && mine >= options_.max_open_per_tenant) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tenant '", tenant, "' has ", mine,
                     " upload reservations open, the bound (--tenant_max_upload_reservations=",
                     options_.max_open_per_tenant, "); commit or cancel some first"));
  }
  return absl::OkStatus();
}

absl::StatusOr<ReservationSnapshot> UploadReservations::Reserve(
    const Caller& caller, std::unique_ptr<UploadSession> upload, MemoryOwnerTag owner) {
  RETURN_IF_ERROR(CheckRoom(caller));
  auto record = std::make_unique<Record>();
  ReservationSnapshot out;
  const Tensor& tensor = upload->tensor();
  for (size_t i = 0; i < tensor.shards.size(); ++i) {
    const Shard& shard = tensor.shards[i];
    if (!shard.local()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", i, " is on device ", shard.domain.device_id, " of process ",
          shard.process_index, "; only shards of this daemon can be written in place"));
    }
    absl::StatusOr<std::unique_ptr<ShardExport>> slot =
        backend_->ExportWritable(*shard.buffer, owner);
    if (!slot.ok()) {
      return absl::Status(slot.status().code(),
                          absl::StrCat("shard ", i, ": ", slot.status().message()));
    }
    UploadSlotInfo info;
    info.shard_index = static_cast<int32_t>(i);
    info.device_id = shard.domain.device_id;
    info.size = shard.buffer->size();
    info.offset = (*slot)->offset;
    info.file_size = (*slot)->file_size;
    if ((*slot)->fd >= 0) info.fd_index = static_cast<int32_t>(record->slots.size());
    record->bytes += info.size;
    out.slots.push_back(info);
    if ((*slot)->fd >= 0) record->slots.push_back(*std::move(slot));
  }
  record->tenant = caller.tenant;
  record->upload = std::move(upload);
  record->expires = absl::Now() + options_.ttl;
  out.expires = record->expires;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckRoomLocked(caller.tenant));
    do {
      record->id = absl::StrFormat("u-%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                                   absl::Uniform<uint64_t>(bitgen_));
    } while (open_.contains(record->id));
    record->token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                                    absl::Uniform<uint64_t>(bitgen_));
    out.id = record->id;
    out.fd_token = record->token;
    tokens_[record->token] = record->id;
    ++per_tenant_[record->tenant];
    open_bytes_ += record->bytes;
    open_[record->id] = std::move(record);
  }
  expirer_->Wake();  // its deadline may be the only one
  return out;
}

std::unique_ptr<UploadReservations::Record> UploadReservations::TakeLocked(const std::string& id) {
  auto it = open_.find(id);
  if (it == open_.end()) return nullptr;
  std::unique_ptr<Record> record = std::move(it->second);
  open_.erase(it);
  if (!record->token.empty()) tokens_.erase(record->token);
  if (--per_tenant_[record->tenant] == 0) per_tenant_.erase(record->tenant);
  open_bytes_ -= record->bytes;
  return record;
}

void UploadReservations::Drop(std::unique_ptr<Record> record) {
  if (record->exit_watch != 0 && exits_ != nullptr) exits_->Cancel(record->exit_watch);
  record.reset();  // the fds close, the uncommitted tensor's memory is freed
}

absl::StatusOr<std::shared_ptr<const Tensor>> UploadReservations::Commit(const Caller& caller,
                                                                         const std::string& id) {
  std::unique_ptr<Record> record;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(id);
    if (it == open_.end() || !caller.Sees(it->second->tenant)) return ReservationNotFound(id);
    if (!it->second->token.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("reservation '", id,
                       "' was never redeemed on the region socket, so nothing can have been "
                       "written to it; redeem its fd_token first (or CancelUpload)"));
    }
    record = TakeLocked(id);
  }
  const int64_t bytes = record->bytes;
  absl::StatusOr<std::shared_ptr<const Tensor>> committed = record->upload->CommitWrittenInPlace();
  Drop(std::move(record));
  absl::MutexLock lock(&mu_);
  if (committed.ok()) {
    ++counts_.committed;
    counts_.committed_bytes += bytes;
  } else {
    ++counts_.cancelled;
  }
  return committed;
}

absl::Status UploadReservations::Cancel(const Caller& caller, const std::string& id) {
  std::unique_ptr<Record> record;
  {
    absl::MutexLock lock(&mu_);
    auto it = open_.find(id);
    if (it == open_.end() || !caller.Sees(it->second->tenant)) return ReservationNotFound(id);
    record = TakeLocked(id);
    ++counts_.cancelled;
  }
  Drop(std::move(record));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> UploadReservations::Redeem(
    const std::string& token, const std::shared_ptr<PeerProcess>& writer) {
  absl::MutexLock lock(&mu_);
  auto found = tokens_.find(token);
  if (found == tokens_.end()) {
    return absl::NotFoundError("unknown, used or expired upload token");
  }
  const std::string id = found->second;
  Record& record = *open_.at(id);
  const absl::Time now = absl::Now();
  if (record.expires <= now) {
    return absl::NotFoundError(absl::StrCat(
        "upload token expired ", absl::FormatDuration(options_.ttl), " after ReserveUpload"));
  }
  tokens_.erase(found);
  record.token.clear();
  std::vector<int> fds;
  fds.reserve(record.slots.size());
  for (auto& slot : record.slots) fds.push_back(slot->TakeFd());
  if (exits_ != nullptr && writer != nullptr) {
    // A writer this daemon cannot watch (ProcessExitWatcher::Prepare) is
    // bounded by the ttl below instead.
    if (absl::StatusOr<WatchablePid> watchable = ProcessExitWatcher::Prepare(*writer);
        watchable.ok()) {
      record.exit_watch = exits_->Watch(*std::move(watchable), [this, id] { WriterExited(id); });
    }
  }
  // A watched writer may copy as long as it takes: its exit ends the
  // reservation. An unwatched one gets `ttl` more.
  record.expires = record.exit_watch != 0 ? absl::InfiniteFuture() : now + options_.ttl;
  return fds;
}

void UploadReservations::WriterExited(const std::string& id) {
  std::unique_ptr<Record> record;
  {
    absl::MutexLock lock(&mu_);
    record = TakeLocked(id);
    if (record == nullptr) return;
    ++counts_.writer_exited;
  }
  record->exit_watch = 0;  // the watch fired: nothing to cancel
  Drop(std::move(record));
}

absl::Time UploadReservations::Expire(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  std::vector<std::unique_ptr<Record>> expired;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const auto& [id, record] : open_) {
      if (record->expires <= now) {
        ids.push_back(id);
      } else {
        next = std::min(next, record->expires);
      }
    }
    for (const std::string& id : ids) expired.push_back(TakeLocked(id));
    counts_.expired += static_cast<int64_t>(ids.size());
  }
  for (auto& record : expired) Drop(std::move(record));
  return next;
}

int64_t UploadReservations::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(open_.size());
}

int64_t UploadReservations::open_bytes() const {
  absl::MutexLock lock(&mu_);
  return open_bytes_;
}

UploadReservations::Counts UploadReservations::counts() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

}  // namespace placement::server
