// RendezvousStore: the key-value store through which the processes of a
// cross-process transport (cross_process_transport.h) find each other: each
// publishes what the others need to connect (Gloo: its listening address;
// NCCL: rank 0's unique id) under a key and waits for the others'. Keys are
// written once per rendezvous; values are small. Once every rank of a group
// has connected, one of them deletes the group's keys (DeletePrefix), so
// the store holds only rendezvous in progress.
//
// Implementations:
//   CoordinatorApi           the cluster coordinator's key-value store
//                            (server/cluster/coordinator_api.h): what the
//                            daemons use.
//   InMemoryRendezvousStore  ranks are threads of one process (tests, the
//                            benchmark's Gloo baseline).
//   FileRendezvousStore      ranks are processes that share a directory: one
//                            node, or several nodes over a shared filesystem.
//                            Each key is a file written atomically (temp file +
//                            rename); readers poll with a bounded backoff.
//   AbortableRendezvousStore a wrapper over any of these for one rendezvous
//                            that another thread can end early
//                            (abortable_rendezvous_store.h).
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_RENDEZVOUS_STORE_H_
#define PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_RENDEZVOUS_STORE_H_

#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace placement::server {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;

  // Publishes `value` under `key`, replacing an earlier value.
  // INVALID_ARGUMENT for an empty key; UNAVAILABLE when the store cannot be
  // written (the message carries the OS error).
  virtual absl::Status Set(const std::string& key, const std::string& value) = 0;

  // The value of `key`, waiting up to `timeout` for a rank to publish it.
  // DEADLINE_EXCEEDED naming the key and the timeout when nobody did.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;

  // Deletes every key that starts with `prefix`; returns how many.
  // UNAVAILABLE when the store cannot be reached or written.
  virtual absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) = 0;
};

class InMemoryRendezvousStore final : public RendezvousStore {
 public:
  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;
  size_t size() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> values_ ABSL_GUARDED_BY(mu_);
};

class FileRendezvousStore final : public RendezvousStore {
 public:
  // REQUIRES: `directory` exists and every rank can read and write it.
  explicit FileRendezvousStore(std::string directory) : directory_(std::move(directory)) {}

  absl::Status Set(const std::string& key, const std::string& value) override;
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  absl::StatusOr<int64_t> DeletePrefix(const std::string& prefix) override;

  // The file that holds `key`: characters outside [A-Za-z0-9_.-] are
  // escaped as %XX, so any key maps to one file name.
  std::string PathFor(const std::string& key) const;

 private:
  std::string directory_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_COLLECTIVE_TRANSPORT_RENDEZVOUS_STORE_H_
