#include "server/collective/transport/gloo/gloo_context_cache.h"

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/collective/cluster/cluster_item.h"
#include "server/collective/transport/abortable_rendezvous_store.h"
#include "server/collective/transport/gloo/gloo_ring_context.h"
#include "server/collective/transport/gloo/gloo_support.h"
#include "server/logging.h"

namespace placement::server {

std::string GlooPrefix(const TransportGroupKey& key) { return absl::StrCat("gloo/", key.Name()); }

GlooContextCache::GlooContextCache(RendezvousStore* store,
                                   std::shared_ptr<gloo::transport::Device> device,
                                   int32_t process_index)
    : store_(store), device_(std::move(device)), process_index_(process_index) {}

GlooContextCache::~GlooContextCache() = default;

std::shared_ptr<GlooContextCache::Entry> GlooContextCache::EntryFor(const TransportGroupKey& key,
                                                                    const std::string& prefix) {
  return entries_.GetOrMake(key.epoch, prefix,
                            [&] { return std::make_shared<Entry>(prefix, key.processes); });
}

absl::StatusOr<std::shared_ptr<gloo::Context>> GlooContextCache::Get(const TransportGroupKey& key,
                                                                     absl::Duration budget) {
  const std::string prefix = GlooPrefix(key);
  std::shared_ptr<Entry> entry = EntryFor(key, prefix);
  absl::ReleasableMutexLock lock(&entry->mu);
  if (entry->failed) {
    // Aborted for a lost process before this call reached it: the cluster's
    // reason, as a call inside the operation gets it.
    if (!entry->abort_reason.empty()) {
      return absl::UnavailableError(absl::StrCat("gloo context ", prefix, " over processes ",
                                                 ProcessListKey(key.processes),
                                                 " was aborted: ", entry->abort_reason));
    }
    return absl::UnavailableError(
        absl::StrCat("gloo context ", prefix, " failed earlier; the set needs a new generation"));
  }
  if (entry->context != nullptr) return entry->context;
  absl::StatusOr<std::shared_ptr<gloo::Context>> context =
      Connect(key, prefix, budget, entry->rendezvous);
  // FailProcess aborts a rendezvous in progress (also one that connected
  // just before this line: dropped here); once it is over, FailProcess
  // waits for this lock and fails the key as a connected one.
  const absl::Status aborted = entry->rendezvous.End();
  if (context.ok() && !aborted.ok()) {
    AbortGlooContext(**context);
    context = absl::UnavailableError(absl::StrCat("gloo context ", prefix, " over processes ",
                                                  ProcessListKey(key.processes),
                                                  " was aborted: ", aborted.message()));
  }
  if (!context.ok()) {
    entry->failed = true;
    if (!aborted.ok()) entry->abort_reason = std::string(aborted.message());
    // The key is refused everywhere from now on: nobody reads its keys.
    // Deleted off the lock (a coordinator call).
    const bool take = TakeKeysLocked(*entry);
    lock.Release();
    if (take) DeleteKeys(prefix);
    return context.status();
  }
  entry->context = *context;
  return entry->context;
}

absl::StatusOr<std::shared_ptr<gloo::Context>> GlooContextCache::Connect(
    const TransportGroupKey& key, const std::string& prefix, absl::Duration budget,
    RendezvousAbort& abort) {
  const auto mine = std::lower_bound(key.processes.begin(), key.processes.end(), process_index_);
  const int rank = static_cast<int>(mine - key.processes.begin());
  const int size = static_cast<int>(key.processes.size());
  const std::string what =
      absl::StrCat("gloo rendezvous of processes ", ProcessListKey(key.processes), " under ",
                   prefix, " (Gloo rank ", rank, " of ", size, ")");
  // Through a store that FailProcess, or a process that gave the
  // generation up, can cut short.
  AbortableRendezvousStore store(store_, &abort, AbortableRendezvousStore::kPoll,
                                 GenerationAbandonedKey(key.epoch, key.set_key, key.generation));
  absl::StatusOr<std::shared_ptr<gloo::Context>> context =
      GlooRingContext::Connect(store, prefix, rank, size, device_, budget, &abort);
  if (!context.ok()) {
    return absl::Status(context.status().code(),
                        absl::StrCat(what, ": ", context.status().message()));
  }
  return context;
}

bool GlooContextCache::TakeKeysLocked(Entry& entry) {
  if (entry.keys_deleted) return false;
  entry.keys_deleted = true;
  return true;
}

void GlooContextCache::DeleteKeys(const std::string& prefix) {
  // GlooRingContext names its keys "<prefix>/ring/<rank>".
  absl::StatusOr<int64_t> deleted = store_->DeletePrefix(absl::StrCat(prefix, "/"));
  if (!deleted.ok()) {
    LogWarning("gloo: could not delete the rendezvous keys of ", prefix, ": ",
               deleted.status().message());
  }
}

void GlooContextCache::Ran(const TransportGroupKey& key, int witness) {
  if (witness < 0 || witness >= static_cast<int>(key.processes.size()) ||
      key.processes[witness] != process_index_) {
    return;
  }
  const std::string prefix = GlooPrefix(key);
  std::shared_ptr<Entry> entry = EntryFor(key, prefix);
  bool take = false;
  {
    absl::MutexLock lock(&entry->mu);
    take = TakeKeysLocked(*entry);
  }
  if (take) DeleteKeys(prefix);
}

void GlooContextCache::Fail(const TransportGroupKey& key) {
  const std::string prefix = GlooPrefix(key);
  std::shared_ptr<Entry> entry = EntryFor(key, prefix);
  std::shared_ptr<gloo::Context> dropped;
  bool take = false;
  {
    absl::MutexLock lock(&entry->mu);
    entry->failed = true;
    dropped = std::move(entry->context);
    take = TakeKeysLocked(*entry);
  }
  // Closed now, outside the locks, even while a call still holds it: a
  // neighbour whose operation waits on this process fails at once and
  // closes its own connections in turn (see the header).
  if (dropped != nullptr) AbortGlooContext(*dropped);
  if (take) DeleteKeys(prefix);
}

void GlooContextCache::FailGeneration(uint64_t epoch, const std::string& set_key,
                                      uint64_t generation) {
  // Every subset's prefix starts with the set's, up to "/p".
  const std::string stem =
      absl::StrCat("gloo/", TransportGroupKey{epoch, set_key, generation, {}}.GenerationStem());
  FailWhere(entries_.WithPrefix(epoch, stem),
            absl::StrCat("generation ", generation, " of set ", set_key, " (epoch ", epoch,
                         ") was given up here"));
}

void GlooContextCache::FailProcess(int32_t process, uint64_t through_epoch,
                                   const std::string& why) {
  FailWhere(entries_.All([&](uint64_t epoch, const Entry& e) {
    return epoch <= through_epoch &&
           std::binary_search(e.processes.begin(), e.processes.end(), process);
  }),
            why);
}

void GlooContextCache::FailWhere(const std::vector<std::shared_ptr<Entry>>& entries,
                                 const std::string& why) {
  for (const std::shared_ptr<Entry>& entry : entries) {
    std::shared_ptr<gloo::Context> context;
    // A key that is connecting holds its lock for its rendezvous: its waits
    // on the store end with `why`, and Get fails the key. One whose
    // rendezvous is over is released at once.
    if (!entry->mu.TryLock()) {
      if (entry->rendezvous.Abort(absl::UnavailableError(why))) continue;
      entry->mu.Lock();
    }
    entry->failed = true;
    if (entry->abort_reason.empty()) entry->abort_reason = why;
    context = std::move(entry->context);
    // Refused everywhere from now on, as Fail()'s: nobody reads its keys.
    const bool take = TakeKeysLocked(*entry);
    entry->mu.Unlock();
    if (context != nullptr) AbortGlooContext(*context);
    if (take) DeleteKeys(entry->prefix);
  }
}

std::string GlooContextCache::AbortReason(const TransportGroupKey& key, absl::Duration wait) {
  std::shared_ptr<Entry> entry = entries_.Find(key.epoch, GlooPrefix(key));
  if (entry == nullptr) return "";
  const auto said = [](Entry* e)
                        ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->mu) { return !e->abort_reason.empty(); };
  entry->mu.LockWhenWithTimeout(absl::Condition(+said, entry.get()), wait);
  std::string reason = entry->abort_reason;
  entry->mu.Unlock();
  return reason;
}

bool GlooContextCache::Connected(const TransportGroupKey& key) const {
  std::shared_ptr<Entry> entry = entries_.Find(key.epoch, GlooPrefix(key));
  // A key that is connecting holds its lock: not connected yet.
  if (entry == nullptr || !entry->mu.TryLock()) return false;
  const bool connected = entry->context != nullptr;
  entry->mu.Unlock();
  return connected;
}

void GlooContextCache::DropEpochsBefore(uint64_t epoch,
                                        const std::vector<TransportGroupKey>& kept) {
  entries_.DropEpochsBefore(epoch, kept, "gloo/");
}

size_t GlooContextCache::connected() const {
  size_t n = 0;
  for (const auto& entry : entries_.All()) {
    // A key that is connecting holds its lock: not connected yet.
    if (entry->mu.TryLock()) {
      n += entry->context != nullptr ? 1 : 0;
      entry->mu.Unlock();
    }
  }
  return n;
}

}  // namespace placement::server
