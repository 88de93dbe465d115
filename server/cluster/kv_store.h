// KvStore: the coordinator's key-value store (XLA coordination service
// KeyValueSet / BlockingKeyValueGet; torch TCPStore): rendezvous for Gloo
// contexts and NCCL unique ids. Values are small; a Get waits for its key.
//
// Bounds: keys of 1..1024 bytes, values up to 1 MiB, at most 100000 keys
// (INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the numbers).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_CLUSTER_KV_STORE_H_
#define PLACEMENT_SERVER_CLUSTER_KV_STORE_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

class KvStore {
 public:
  static constexpr size_t kMaxKeyBytes = 1024;
  static constexpr size_t kMaxValueBytes = size_t{1} << 20;
  static constexpr size_t kMaxKeys = 100000;

  // Sets or replaces `key`.
  absl::Status Set(const std::string& key, std::string value);
  // The value of `key`, waiting up to `timeout`; DEADLINE_EXCEEDED naming
  // the key and the timeout.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) const;
  // Removes every key starting with `prefix`; returns how many.
  int64_t DeletePrefix(const std::string& prefix);
  int64_t size() const;
  // Wakes every Get with UNAVAILABLE, now and from now on (shutdown).
  void Shutdown();

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CLUSTER_KV_STORE_H_
