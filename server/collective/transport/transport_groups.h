// TransportGroups<Entry>: a cross-process transport's per-group state,
// filed by membership epoch and group name (TransportGroupKey::Name, or a
// prefix of the transport's own in front) -- what GlooContextCache and
// NcclTransport both keep: an entry made on first use, the entries of a
// generation or holding a process found for an abort, and whole epochs
// dropped at once when the cluster retires them (but groups that outlive
// their epoch). Entries are shared: a call
// that holds one keeps it past its removal.
//
// Thread-safe (one lock over the table; entries guard themselves).
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_GROUPS_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_GROUPS_H_

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/collective/transport/cross_process_transport.h"

namespace placement::server {

template <typename Entry>
class TransportGroups {
 public:
  // The entry `name` of `epoch`, made by `make` when there is none.
  std::shared_ptr<Entry> GetOrMake(uint64_t epoch, const std::string& name,
                                   absl::FunctionRef<std::shared_ptr<Entry>()> make) {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Entry>& entry = entries_[epoch][name];
    if (entry == nullptr) entry = make();
    return entry;
  }

  // The entry `name` of `epoch`, or null.
  std::shared_ptr<Entry> Find(uint64_t epoch, const std::string& name) const {
    absl::MutexLock lock(&mu_);
    auto by_name = entries_.find(epoch);
    if (by_name == entries_.end()) return nullptr;
    auto it = by_name->second.find(name);
    return it == by_name->second.end() ? nullptr : it->second;
  }

  // The entries of `epoch` whose name starts with `prefix`.
  std::vector<std::shared_ptr<Entry>> WithPrefix(uint64_t epoch, absl::string_view prefix) const {
    std::vector<std::shared_ptr<Entry>> out;
    absl::MutexLock lock(&mu_);
    auto by_name = entries_.find(epoch);
    if (by_name == entries_.end()) return out;
    for (const auto& [name, entry] : by_name->second) {
      if (absl::StartsWith(name, prefix)) out.push_back(entry);
    }
    return out;
  }

  // Every entry of every epoch for which `keep(epoch, entry)` is true.
  std::vector<std::shared_ptr<Entry>> All(
      absl::FunctionRef<bool(uint64_t epoch, const Entry&)> keep = [](uint64_t, const Entry&) {
        return true;
      }) const {
    std::vector<std::shared_ptr<Entry>> out;
    absl::MutexLock lock(&mu_);
    for (const auto& [epoch, by_name] : entries_) {
      for (const auto& [name, entry] : by_name) {
        if (keep(epoch, *entry)) out.push_back(entry);
      }
    }
    return out;
  }

  // Removes the entries of epochs before `epoch` but the groups of `kept`
  // (groups that outlive their epoch), every generation of them: the names
  // starting with `prefix` + the key's GenerationStem (`prefix`: what the
  // transport puts in front of TransportGroupKey::Name). Removed entries are
  // destroyed here, outside the lock, unless a caller still holds one.
  void DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept = {},
                        absl::string_view prefix = "") {
    std::vector<std::string> stems;
    stems.reserve(kept.size());
    for (const TransportGroupKey& key : kept) {
      stems.push_back(absl::StrCat(prefix, key.GenerationStem()));
    }
    std::vector<std::shared_ptr<Entry>> dropped;
    {
      absl::MutexLock lock(&mu_);
      auto end = entries_.lower_bound(epoch);
      for (auto it = entries_.begin(); it != end;) {
        auto& by_name = it->second;
        for (auto entry = by_name.begin(); entry != by_name.end();) {
          const bool keep = std::any_of(stems.begin(), stems.end(), [&](const std::string& stem) {
            return absl::StartsWith(entry->first, stem);
          });
          if (keep) {
            ++entry;
            continue;
          }
          dropped.push_back(std::move(entry->second));
          by_name.erase(entry++);
        }
        it = by_name.empty() ? entries_.erase(it) : std::next(it);
      }
    }
  }

 private:
  using Table = std::map<uint64_t, absl::flat_hash_map<std::string, std::shared_ptr<Entry>>>;
  mutable absl::Mutex mu_;
  Table entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_TRANSPORT_GROUPS_H_
