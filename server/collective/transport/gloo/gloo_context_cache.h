// GlooContextCache: the connected Gloo contexts of one process of a cluster,
// one per group (TransportGroupKey: membership epoch, process set, set
// generation, subset of processes) -- the Gloo transport's groups. A context
// is created on first use by a rendezvous through the cluster's
// RendezvousStore under a prefix naming all four ("gloo/e3/s0,1,3/g0/p0,1");
// every process of the subset creates it the same way, with its position in
// the subset as its Gloo rank. Contexts are ring contexts
// (gloo_ring_context.h): each process connects to its two neighbours in the
// subset and reads two keys, so a context of N processes costs 2N store
// reads and N connections (N(N-1)/2 and ~2N^2 reads as a full mesh).
//
// A context that failed (a rendezvous that timed out, an operation that
// timed out or lost a peer) is dropped and its key refused from then on:
// its connections are in an unknown state and its rendezvous keys are
// spent, so a retry under the same prefix could pair with stale addresses.
// The cluster bumps the set's generation, which names a fresh context.
//
// Thread-safe. Contexts of different keys connect in parallel; a second
// caller of a key that is connecting waits for the first.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_CONTEXT_CACHE_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_CONTEXT_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/collective/transport/abortable_rendezvous_store.h"
#include "server/collective/transport/cross_process_transport.h"
#include "server/collective/transport/transport_groups.h"

namespace gloo {
class Context;
namespace transport {
class Device;
}  // namespace transport
}  // namespace gloo

namespace placement::server {

// "gloo/e3/s0,1,3/g0/p0,1": the rendezvous prefix of `key`'s context.
std::string GlooPrefix(const TransportGroupKey& key);

class GlooContextCache {
 public:
  // REQUIRES: `store` outlives the cache; `device` is the transport every
  // context connects through.
  GlooContextCache(RendezvousStore* store, std::shared_ptr<gloo::transport::Device> device,
                   int32_t process_index);
  ~GlooContextCache();
  GlooContextCache(const GlooContextCache&) = delete;
  GlooContextCache& operator=(const GlooContextCache&) = delete;

  // The context of `key`, connected on first use: the ring neighbours'
  // addresses are awaited up to `budget`, each pair's connection up to
  // `budget` more.
  // REQUIRES: key.processes holds this process.
  // Errors (the rendezvous then counts as a failure of the key):
  //   DEADLINE_EXCEEDED from the store when a neighbour in the subset did
  //     not publish its addresses within `budget`, or from Gloo's connect;
  //   UNAVAILABLE when Gloo cannot connect, when FailProcess or
  //     FailGeneration aborted the rendezvous (their words), or when the key
  //     failed before (Fail): the set needs a new generation.
  // A failed rendezvous deletes the group's keys from the store: the key is
  // refused everywhere from then on, so nobody connects with them again.
  absl::StatusOr<std::shared_ptr<gloo::Context>> Get(const TransportGroupKey& key,
                                                     absl::Duration budget);

  // Drops the context of `key` and refuses the key from now on. Its
  // connections close at once (AbortGlooContext), even while a call holds
  // it. On a ring a process's operation waits on a neighbour, which may
  // wait on its other neighbour, and so on: every process whose wait leads
  // to this one fails within one connection reset per process in between
  // (at most N - 2 for N processes; ~50 ms for 7 on loopback), each
  // failing call closing its own connections through this function. A
  // chain that leads to a process that is silent without closing anything
  // ends when that process's neighbour is told (FailProcess, which the
  // cluster does on every survivor) or at the operation's timeout. The
  // group's rendezvous keys, if still in the store (no operation succeeded),
  // are deleted.
  void Fail(const TransportGroupKey& key);

  // An operation on `key`'s context succeeded here, and the success of its
  // Gloo rank `witness` shows that every process of the subset was past its
  // rendezvous (each took part; WitnessRank in hierarchical_collectives.h):
  // on that process the context's keys are deleted from the store, once.
  // On a ring context only some ranks know that: a broadcast's root, for
  // one, is done once its neighbour has the bytes.
  void Ran(const TransportGroupKey& key, int witness);

  // Fail() for every context of `set_key`'s `generation` in `epoch` that
  // this process holds or tried (every subset): their connections close, so
  // peers inside an operation on one of them fail at once; one still in its
  // rendezvous ends as FailProcess ends it (UNAVAILABLE, the generation was
  // given up), rather than this call waiting for its budget.
  void FailGeneration(uint64_t epoch, const std::string& set_key, uint64_t generation);

  // Fail() for every context of an epoch up to `through_epoch` whose subset
  // holds `process`,
  // and an operation in flight on one ends at once (AbortGlooContext); its
  // caller reads `why` from AbortReason. A context that is still connecting
  // is aborted too: its rendezvous's waits on the store end within
  // AbortableRendezvousStore::kPoll, its Gloo connects at once (the pairs
  // close: RendezvousAbort::OnAbort), and Get fails UNAVAILABLE -- "gloo
  // rendezvous of processes 0,1,2 under ... (Gloo rank 0 of 3): <why>" --
  // instead of waiting out its budget for a process that will never
  // publish, or that published and then died or went silent.
  void FailProcess(int32_t process, uint64_t through_epoch, const std::string& why);

  // Why the context of `key` was aborted by FailProcess or FailGeneration
  // (the first of them to say); empty otherwise.
  // With `wait`, waits up to that long for FailProcess to say: a call that
  // failed because a peer closed its connections (the peer aborted on a
  // loss it learnt first) learns the loss itself moments later.
  std::string AbortReason(const TransportGroupKey& key, absl::Duration wait = absl::ZeroDuration());

  // Whether the context of `key` is connected here.
  bool Connected(const TransportGroupKey& key) const;

  // Frees the contexts (and refusals) of epochs before `epoch`, but those of
  // the generations `kept` names (TransportGroupKeys with an empty subset).
  // Calls that hold one keep it until they return.
  void DropEpochsBefore(uint64_t epoch, const std::vector<TransportGroupKey>& kept);

  // Connected contexts held (tests, metrics).
  size_t connected() const;

 private:
  struct Entry {
    Entry(std::string prefix, std::vector<int32_t> processes)
        : prefix(std::move(prefix)), processes(std::move(processes)) {}
    const std::string prefix;              // GlooPrefix of the key
    const std::vector<int32_t> processes;  // the key's subset, ascending
    absl::Mutex mu;
    std::shared_ptr<gloo::Context> context ABSL_GUARDED_BY(mu);
    bool failed ABSL_GUARDED_BY(mu) = false;
    bool keys_deleted ABSL_GUARDED_BY(mu) = false;
    std::string abort_reason ABSL_GUARDED_BY(mu);
    // Aborted by FailProcess / FailGeneration while the key connects (mu is
    // held then).
    RendezvousAbort rendezvous;
  };

  std::shared_ptr<Entry> EntryFor(const TransportGroupKey& key, const std::string& prefix);
  // Whether this call deletes the entry's rendezvous keys (once per key).
  static bool TakeKeysLocked(Entry& entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(entry.mu);
  void DeleteKeys(const std::string& prefix);
  // Fails `entries` (FailProcess's and FailGeneration's part), `why` said
  // to their callers, and deletes their rendezvous keys as Fail() does.
  void FailWhere(const std::vector<std::shared_ptr<Entry>>& entries, const std::string& why);
  // The rendezvous of `key`, its store waits ended early by `abort`.
  absl::StatusOr<std::shared_ptr<gloo::Context>> Connect(const TransportGroupKey& key,
                                                         const std::string& prefix,
                                                         absl::Duration budget,
                                                         RendezvousAbort& abort);

  RendezvousStore* const store_;
  const std::shared_ptr<gloo::transport::Device> device_;
  const int32_t process_index_;
  // By epoch and rendezvous prefix.
  TransportGroups<Entry> entries_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_GLOO_GLOO_CONTEXT_CACHE_H_
