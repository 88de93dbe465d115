// AbortableRendezvousStore: the RendezvousStore one rendezvous (a transport
// group connecting) reads through, so that another thread can end it early
// -- the cluster lost a process of the group, whose key will never come.
// The underlying store's Get blocks up to its timeout and cannot be woken
// (CoordinatorApi's is one RPC), so this store waits in slices of at most
// `poll` and checks its RendezvousAbort between them: once Abort is called,
// every Get and Set of the rendezvous fails within `poll` with the abort's
// status instead of waiting out its timeout. While nobody aborts, a Get
// behaves as the underlying one (the same value, or DEADLINE_EXCEEDED
// naming the key and the whole timeout), at the cost of one underlying Get
// per `poll` while the key is missing.
//
// Thread-safe: RendezvousAbort may be aborted from any thread while a Get
// of any thread waits on the store.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_ABORTABLE_RENDEZVOUS_STORE_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_ABORTABLE_RENDEZVOUS_STORE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/transport/rendezvous_store.h"

namespace placement::server {

// Whether a rendezvous was aborted, and why; and whether it is over, so
// that the one who aborts knows whether the rendezvous will fail or it must
// undo a connected group itself.
class RendezvousAbort {
 public:
  // Unless the rendezvous ended (End), it fails with `why` (the first
  // abort's status wins) and this returns true; after End, false and
  // nothing changes. REQUIRES: !why.ok().
  bool Abort(absl::Status why);
  // The rendezvous is over (connected or failed); later aborts return
  // false. Returns the abort's status when it was aborted first, else OK.
  absl::Status End();
  // OK until aborted, then the abort's status.
  absl::Status status() const;

  // For the part of a rendezvous that waits outside the store (Gloo's
  // connect): `hook` runs once, on the aborting thread, when Abort comes
  // before End (it may run after End returned, while the abort races it;
  // End's status then says so). Returns false and keeps nothing when the
  // rendezvous was already aborted or ended. A second hook replaces the
  // first.
  bool OnAbort(std::function<void(const absl::Status&)> hook);

 private:
  mutable absl::Mutex mu_;
  absl::Status why_ ABSL_GUARDED_BY(mu_);
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  std::function<void(const absl::Status&)> hook_ ABSL_GUARDED_BY(mu_);
};

// UNAVAILABLE with the value of `key` once someone published it in `store`
// (a look, not a wait: at most 1 ms; the coordinator reads a zero wait as
// its default); OK otherwise. What a rendezvous that watches a key checks.
absl::Status WatchedKeyStatus(RendezvousStore& store, const std::string& key);

class AbortableRendezvousStore final : public RendezvousStore {
 public:
  // How long a Get waits on the underlying store between two looks at the
  // abort: what an abort may take to end a waiting rendezvous.
  static constexpr absl::Duration kPoll = absl::Milliseconds(200);

  // REQUIRES: `store` and `abort` outlive this store; poll > 0.
  // `watch`, when not empty, is a key of the underlying store that ends the
  // rendezvous too once someone publishes it (GenerationAbandonedKey: a
  // process gave up the call the rendezvous is for).
  AbortableRendezvousStore(RendezvousStore* store, const RendezvousAbort* abort,
                           absl::Duration poll = kPoll, std::string watch = "")
      : store_(store), abort_(abort), poll_(poll), watch_(std::move(watch)) {}

  // The abort's status once aborted, else the underlying store's.
  absl::Status Set(const std::string& key, const std::string& value) override;
  // The abort's status once aborted (checked before each slice); UNAVAILABLE
  // with the watched key's value once it is published (looked up after
  // each slice that found nothing: one more underlying Get per `poll` while
  // the key is missing); else as RendezvousStore::Get.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  // The underlying store's, whether aborted or not (clean-up still runs).
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

 private:
  RendezvousStore* const store_;
  const RendezvousAbort* const abort_;
  const absl::Duration poll_;
  const std::string watch_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_ABORTABLE_RENDEZVOUS_STORE_H_
