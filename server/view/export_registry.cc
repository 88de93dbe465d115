#include "server/view/export_registry.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "server/logging.h"

namespace placement::server {

struct ExportRegistry::Record {
  ExportSnapshot info;  // without shards and token
  std::string token;    // empty once redeemed
  absl::Time redeem_deadline;
  // Keeps the memory allocated and counted; TakeForDonation refuses it.
  std::shared_ptr<const Tensor> tensor;
  std::vector<std::unique_ptr<ShardExport>> shards;
  int64_t exit_watch = 0;
};

namespace {

absl::Status ExportNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("export_id '", id.substr(0, 80),
                                          "': no such export (unexported, its session or reader "
                                          "ended, or it belongs to another tenant or session)"));
}

absl::string_view EndReason(ExportEnd why) {
  switch (why) {
    case ExportEnd::kUnexport:
      return "unexport";
    case ExportEnd::kSession:
      return "session";
    case ExportEnd::kProcessExit:
      return "process_exit";
    case ExportEnd::kExpired:
      return "expired";
    case ExportEnd::kShutdown:
      return "shutdown";
  }
  return "unexport";
}

// The shards an export covers: `requested` checked, or every local one.
absl::StatusOr<std::vector<int32_t>> SelectShards(const Tensor& tensor,
                                                  const std::vector<int32_t>& requested) {
  const auto count = static_cast<int32_t>(tensor.shards.size());
  std::vector<int32_t> out;
  if (requested.empty()) {
    for (int32_t i = 0; i < count; ++i) {
      if (tensor.shards[i].local()) out.push_back(i);
    }
    if (out.empty()) {
      return absl::FailedPreconditionError(
          absl::StrCat("tensor '", tensor.id, "' has no shard on this daemon (its ", count,
                       " shards are on other nodes); export them through their daemons"));
    }
    return out;
  }
  absl::flat_hash_set<int32_t> seen;
  for (size_t k = 0; k < requested.size(); ++k) {
    const int32_t i = requested[k];
    if (i < 0 || i >= count) {
      return absl::InvalidArgumentError(absl::StrCat("shard_indices[", k, "] = ", i,
                                                     " is out of range: tensor '", tensor.id,
                                                     "' has ", count, " shards"));
    }
    if (!seen.insert(i).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard_indices[", k, "] = ", i, " is repeated"));
    }
    const Shard& shard = tensor.shards[i];
    if (!shard.local()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "shard ", i, " of tensor '", tensor.id, "' is on device ", shard.domain.device_id,
          " of process ", shard.process_index, "; export it through that node's daemon"));
    }
    out.push_back(i);
  }
  return out;
}

}  // namespace

ExportRegistry::ExportRegistry(DeviceBackend* backend, Metrics* metrics, bool fd_passing,
                               ExportOptions options)
    : backend_(backend), metrics_(metrics), fd_passing_(fd_passing), options_(options) {
  if (absl::StatusOr<std::unique_ptr<ProcessExitWatcher>> exits = ProcessExitWatcher::Create();
      exits.ok()) {
    exits_ = *std::move(exits);
  } else {
    LogWarning("views: cannot watch reader processes (", exits.status().message(),
               "); an export outside a session ends only with Unexport");
  }
  if (metrics_ != nullptr) {
    metrics_->Describe("placementd_views_exported_total", "counter",
                       "Shard exports made (ViewService.ExportShards).");
    metrics_->Describe("placementd_view_bytes_total", "counter",
                       "Shard bytes exposed to same-host readers by exports.");
    metrics_->Describe("placementd_view_shards_total", "counter",
                       "Shards exported: mode=in_place (the shard's own memory, sealed), copy (a "
                       "private copy of a shard under 256 KiB), unsealed (the tenant's own memory "
                       "for a copy-out, ExportShards for_copy).",
                       {{{"mode", "in_place"}}, {{"mode", "copy"}}, {{"mode", "unsealed"}}});
    metrics_->Describe("placementd_exports_ended_total", "counter",
                       "Exports ended, by reason: unexport, session (closed or expired), "
                       "process_exit (the reader exited), expired (token never redeemed), "
                       "shutdown.",
                       {{{"reason", "unexport"}},
                        {{"reason", "session"}},
                        {{"reason", "process_exit"}},
                        {{"reason", "expired"}},
                        {{"reason", "shutdown"}}});
  }
  expirer_ = std::make_unique<ExpiryThread>([this](absl::Time now) { return Expire(now); });
}

ExportRegistry::~ExportRegistry() {
  expirer_.reset();
  // Before the exports go, so that no exit callback runs into them.
  exits_.reset();
  absl::flat_hash_map<std::string, std::unique_ptr<Record>> all;
  {
    absl::MutexLock lock(&mu_);
    all.swap(exports_);
    tokens_.clear();
    open_bytes_ = 0;
  }
  for (auto& [id, e] : all) {
    e->exit_watch = 0;
    Retire(std::move(e), ExportEnd::kShutdown);
  }
}

void ExportRegistry::set_sessions(std::function<std::string(const std::string&)> session_of,
                                  std::function<bool(const std::string&)> is_open) {
  session_of_ = std::move(session_of);
  session_open_ = std::move(is_open);
}

bool ExportRegistry::VisibleLocked(const Caller& caller, const Record& e) const {
  if (caller.admin()) return true;
  return caller.Sees(e.info.tenant) &&
         (e.info.session_id.empty() || e.info.session_id == caller.session_id);
}

absl::Status ExportRegistry::CheckLimitsLocked(const std::string& tenant) const {
  const auto open = static_cast<int64_t>(exports_.size());
  if (options_.max_exports > 0 && open >= options_.max_exports) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot export: ", open,
                                                     " of --max_exports=", options_.max_exports,
                                                     " are open; unexport some first"));
  }
  if (options_.max_exports_per_tenant > 0) {
    int64_t mine = 0;
    for (const auto& [id, e] : exports_) mine += e->info.tenant == tenant ? 1 : 0;
    if (mine >= options_.max_exports_per_tenant) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot export: the tenant has ", mine, " of --tenant_max_exports=",
                       options_.max_exports_per_tenant, " open; unexport some first"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ExportSnapshot> ExportRegistry::Export(
    const Caller& caller, std::shared_ptr<const Tensor> tensor,
    const std::vector<int32_t>& shard_indices, std::optional<MemoryOwnerTag> copy_out_owner) {
  const bool for_copy = copy_out_owner.has_value();
  if (!fd_passing_) {
    return absl::FailedPreconditionError(
        "views hand their memory over on the region socket, and this daemon runs with "
        "--region_socket '' (fd passing off)");
  }
  if (session_of_) {
    const std::string session = session_of_(tensor->id);
    if (!session.empty() && session != caller.session_id) {
      return absl::NotFoundError(absl::StrCat(
          "tensor '", tensor->id, "' belongs to session '", session, "', which this call ",
          caller.session_id.empty()
              ? std::string("did not join")
              : absl::StrCat("is not in (it joined '", caller.session_id, "')"),
          "; a session's tensors are exported only within it"));
    }
  }
  ASSIGN_OR_RETURN(std::vector<int32_t> selected, SelectShards(*tensor, shard_indices));
  if (for_copy && shard_indices.empty()) {
    // A copy-out reads each box once: the first replica held here.
    std::vector<int32_t> distinct;
    for (int32_t i : selected) {
      if (std::none_of(distinct.begin(), distinct.end(), [&](int32_t j) {
            return tensor->shards[j].domain.box == tensor->shards[i].domain.box &&
                   tensor->shards[j].domain.partial_index == tensor->shards[i].domain.partial_index;
          })) {
        distinct.push_back(i);
      }
    }
    selected = std::move(distinct);
  }
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckLimitsLocked(caller.tenant));
  }
  auto e = std::make_unique<Record>();
  ExportSnapshot& info = e->info;
  info.tensor_id = tensor->id;
  info.tenant = caller.tenant;
  info.session_id = caller.session_id;
  info.created = absl::Now();
  int32_t fds = 0;
  int64_t copies = 0;
  int64_t unsealed = 0;
  for (int32_t i : selected) {
    const Shard& shard = tensor->shards[i];
    // A copy-out first tries the tenant's own memory unsealed (its block
    // stays reusable); what the platform cannot hand out so is a view.
    std::unique_ptr<ShardExport> exported;
    if (for_copy) {
      absl::StatusOr<std::unique_ptr<ShardExport>> writable =
          backend_->ExportWritable(*shard.buffer, *copy_out_owner);
      if (writable.ok()) {
        exported = *std::move(writable);
      } else if (!absl::IsFailedPrecondition(writable.status()) &&
                 !absl::IsUnimplemented(writable.status())) {
        return writable.status();
      }
    }
    const bool unsealed_shard = exported != nullptr;
    if (!unsealed_shard) {
      ASSIGN_OR_RETURN(exported, backend_->ExportShard(*shard.buffer));
    }
    ShardViewInfo view;
    view.writable = unsealed_shard;
    view.file_size = exported->file_size;
    unsealed += unsealed_shard ? 1 : 0;
    view.shard_index = i;
    view.device_id = shard.buffer->device_id();
    view.size = exported->size;
    view.offset = exported->offset;
    view.copied = exported->copied();
    view.ipc_handle = exported->ipc_handle;
    view.fd_index = exported->fd >= 0 ? fds++ : -1;
    copies += view.copied ? 1 : 0;
    info.bytes += view.size;
    info.shards.push_back(std::move(view));
    e->shards.push_back(std::move(exported));
  }
  info.num_shards = static_cast<int32_t>(selected.size());
  e->tensor = std::move(tensor);
  e->redeem_deadline = info.created + options_.redeem_ttl;
  ExportSnapshot result;
  {
    absl::MutexLock lock(&mu_);
    RETURN_IF_ERROR(CheckLimitsLocked(caller.tenant));
    do {
      info.id = absl::StrFormat("x-%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                                absl::Uniform<uint64_t>(bitgen_));
    } while (exports_.contains(info.id));
    e->token = absl::StrFormat("%016x%016x", absl::Uniform<uint64_t>(bitgen_),
                               absl::Uniform<uint64_t>(bitgen_));
    result = info;
    result.fd_token = e->token;
    info.shards.clear();
    tokens_[e->token] = info.id;
    Totals& totals = totals_[info.tenant];
    ++totals.exports;
    totals.bytes += info.bytes;
    open_bytes_ += info.bytes;
    exports_[info.id] = std::move(e);
  }
  expirer_->Wake();  // its deadline may be the only one
  if (metrics_ != nullptr) {
    metrics_->Increment("placementd_views_exported_total");
    metrics_->Add("placementd_view_bytes_total", {}, static_cast<double>(result.bytes));
    metrics_->Add("placementd_view_shards_total", {{"mode", "copy"}}, static_cast<double>(copies));
    metrics_->Add("placementd_view_shards_total", {{"mode", "in_place"}},
                  static_cast<double>(result.num_shards - copies - unsealed));
    metrics_->Add("placementd_view_shards_total", {{"mode", "unsealed"}},
                  static_cast<double>(unsealed));
  }
  if (!caller.session_id.empty() && session_open_ && !session_open_(caller.session_id)) {
    EndSession(caller.session_id);
    return absl::FailedPreconditionError(absl::StrCat(
        "session '", caller.session_id, "' ended while the shards were exported; unexported"));
  }
  return result;
}

std::unique_ptr<ExportRegistry::Record> ExportRegistry::TakeLocked(const std::string& id) {
  auto it = exports_.find(id);
  if (it == exports_.end()) return nullptr;
  std::unique_ptr<Record> e = std::move(it->second);
  exports_.erase(it);
  if (!e->token.empty()) tokens_.erase(e->token);
  open_bytes_ -= e->info.bytes;
  return e;
}

void ExportRegistry::Retire(std::unique_ptr<Record> e, ExportEnd why) {
  if (e->exit_watch != 0 && exits_ != nullptr) exits_->Cancel(e->exit_watch);
  if (metrics_ != nullptr) {
    metrics_->Increment("placementd_exports_ended_total",
                        {{"reason", std::string(EndReason(why))}});
  }
  // Destroying it closes the fds not handed over, frees private copies and
  // drops the tensor (freeing a deleted tensor's memory).
  e.reset();
}

absl::Status ExportRegistry::Unexport(const Caller& caller, const std::string& id) {
  std::unique_ptr<Record> e;
  {
    absl::MutexLock lock(&mu_);
    auto it = exports_.find(id);
    if (it == exports_.end() || !VisibleLocked(caller, *it->second)) return ExportNotFound(id);
    e = TakeLocked(id);
  }
  Retire(std::move(e), ExportEnd::kUnexport);
  return absl::OkStatus();
}

std::vector<ExportSnapshot> ExportRegistry::List(const Caller& caller) const {
  std::vector<ExportSnapshot> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, e] : exports_) {
      if (VisibleLocked(caller, *e)) out.push_back(e->info);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const ExportSnapshot& a, const ExportSnapshot& b) { return a.id < b.id; });
  return out;
}

ExportRegistry::Totals ExportRegistry::TotalsFor(const Caller& caller) const {
  absl::MutexLock lock(&mu_);
  if (!caller.admin()) {
    auto it = totals_.find(caller.tenant);
    return it == totals_.end() ? Totals{} : it->second;
  }
  Totals all;
  for (const auto& [tenant, totals] : totals_) {
    all.exports += totals.exports;
    all.bytes += totals.bytes;
  }
  return all;
}

absl::StatusOr<std::vector<int>> ExportRegistry::Redeem(
    const std::string& token, const std::shared_ptr<PeerProcess>& reader) {
  absl::MutexLock lock(&mu_);
  auto it = tokens_.find(token);
  auto e = it == tokens_.end() ? exports_.end() : exports_.find(it->second);
  if (e == exports_.end() || e->second->redeem_deadline <= absl::Now()) {
    return absl::NotFoundError(
        absl::StrCat("no export has this token (unknown, already redeemed, or expired ",
                     absl::FormatDuration(options_.redeem_ttl), " after ExportShards)"));
  }
  Record& exported = *e->second;
  // A redeemed export ends when its reader exits. Outside a session nothing
  // else ends it: a reader this daemon cannot watch would hold it for good
  // (refused; the token stays).
  std::optional<WatchablePid> watchable;
  if (exits_ != nullptr) {
    absl::StatusOr<WatchablePid> prepared = ProcessExitWatcher::Prepare(*reader);
    if (!prepared.ok() && exported.info.session_id.empty()) {
      return absl::Status(
          prepared.status().code(),
          absl::StrCat("the redeeming process: ", prepared.status().message(),
                       "; an export made outside a session lives only as long as its reader -- "
                       "export within a session (placement-session metadata)"));
    }
    if (prepared.ok()) watchable = *std::move(prepared);
  }
  tokens_.erase(it);
  exported.token.clear();
  std::vector<int> fds;
  for (const auto& shard : exported.shards) {
    if (shard->fd >= 0) fds.push_back(shard->TakeFd());
  }
  exported.info.reader_pid = reader->pid();
  if (watchable.has_value()) {
    // Watched under mu_, so an end of the export always finds the key.
    const std::string id = exported.info.id;
    exported.exit_watch = exits_->Watch(*std::move(watchable), [this, id] { ProcessExited(id); });
  }
  return fds;
}

void ExportRegistry::ProcessExited(const std::string& id) {
  std::unique_ptr<Record> e;
  {
    absl::MutexLock lock(&mu_);
    e = TakeLocked(id);
  }
  if (e == nullptr) return;
  e->exit_watch = 0;  // the watch fired: nothing to cancel
  Retire(std::move(e), ExportEnd::kProcessExit);
}

int64_t ExportRegistry::EndSession(const std::string& session_id) {
  std::vector<std::unique_ptr<Record>> ended;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> ids;
    for (const auto& [id, e] : exports_) {
      if (e->info.session_id == session_id) ids.push_back(id);
    }
    for (const std::string& id : ids) ended.push_back(TakeLocked(id));
  }
  for (auto& e : ended) Retire(std::move(e), ExportEnd::kSession);
  return static_cast<int64_t>(ended.size());
}

absl::Time ExportRegistry::Expire(absl::Time now) {
  absl::Time next = absl::InfiniteFuture();
  std::vector<std::unique_ptr<Record>> ended;
  {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> expired;
    for (const auto& [id, e] : exports_) {
      if (e->token.empty()) continue;
      if (e->redeem_deadline <= now) {
        expired.push_back(id);
      } else {
        next = std::min(next, e->redeem_deadline);
      }
    }
    for (const std::string& id : expired) ended.push_back(TakeLocked(id));
  }
  for (auto& e : ended) Retire(std::move(e), ExportEnd::kExpired);
  return next;
}

int64_t ExportRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(exports_.size());
}

int64_t ExportRegistry::open_bytes() const {
  absl::MutexLock lock(&mu_);
  return open_bytes_;
}

}  // namespace placement::server
