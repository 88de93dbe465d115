// KvStore: the coordinator's key-value store (XLA coordination service
// KeyValueSet / BlockingKeyValueGet; torch TCPStore): rendezvous for Gloo
// contexts and NCCL unique ids. Values are small; a Get waits for its key.
//
// Waiting Gets hold no thread: each is a callback completed by the Set of
// its key, by its timeout (on the DeadlineTimer's thread) or by Shutdown,
// so any number of processes can wait at once.
//
// Bounds: keys of 1..1024 bytes, values up to 1 MiB, at most 100000 keys
// (INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the numbers).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_KV_STORE_H_
#define PLACEMENT_SERVER_CLUSTER_KV_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/cluster/async_wait.h"
#include "server/cluster/deadline_timer.h"

namespace placement::server {

class KvStore {
 public:
  static constexpr size_t kMaxKeyBytes = 1024;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  static constexpr size_t kMaxKeys = 100000;

  using GetDone = AsyncWait<std::string>::Done;

  // REQUIRES: `timer` outlives the store.
  explicit KvStore(DeadlineTimer* timer) : timer_(timer) {}
  ~KvStore();  // fails waiting Gets with UNAVAILABLE

  // Sets or replaces `key`; completes the Gets waiting for it.
  absl::Status Set(const std::string& key, std::string value);
  // Calls `done` with the value of `key` once it is set, or with
  // DEADLINE_EXCEEDED naming the key and the timeout, or UNAVAILABLE at
  // shutdown. `done` may run on this thread before Get returns, on a
  // Set's thread or on the timer's; it must not call into this store
  // under a lock that those threads take.
  void Get(const std::string& key, absl::Duration timeout, GetDone done);
  // Get, waiting on this thread (tests, tools).
  absl::StatusOr<std::string> GetBlocking(const std::string& key, absl::Duration timeout);
  // Removes every key starting with `prefix`; returns how many.
  int64_t DeletePrefix(const std::string& prefix);
  int64_t size() const;
  // Gets waiting now (tests, metrics).
  int64_t waiting() const;
  // Fails every waiting Get with UNAVAILABLE, now and from now on.
  void Shutdown();

 private:
  using Wait = AsyncWait<std::string>;
  void TimedOut(const std::string& key, const std::shared_ptr<Wait>& wait, absl::Duration timeout);

  DeadlineTimer* const timer_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  std::multimap<std::string, std::shared_ptr<Wait>> waiting_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_KV_STORE_H_
