// BatchUploadSession: a named group of arrays (a pytree dict such as
// {"images", "labels"}) uploaded in one stream under one placement rule,
// all or nothing. Every array's shards are allocated when the session
// starts; chunks arrive array by array (the index never goes backwards) and
// are scattered into that array's shards like a single upload. Commit
// publishes every array, or none.
//
// Destroying or aborting an uncommitted session frees everything.
// Owned by one stream; not thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_BATCH_UPLOAD_SESSION_H_
#define PLACEMENT_SERVER_TENSOR_BATCH_UPLOAD_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/tensor/upload_session.h"

namespace placement::server {

// One array of the group with its resolved placement.
struct BatchArray {
  std::string key;
  TensorSpec spec;
  ResolvedSharding target;
};

class BatchUploadSession {
 public:
  // INVALID_ARGUMENT: no arrays, an empty or repeated key. Otherwise as
  // UploadSession::Start for each array; nothing is kept on error.
  // REQUIRES: store outlives the session.
  static absl::StatusOr<std::unique_ptr<BatchUploadSession>> Start(RemoteShards* remote,
                                                                   TensorStore* store,
                                                                   std::vector<BatchArray> arrays);

  // A batch of sessions already started (multi-controller uploads, one per
  // array); `keys` name them. INVALID_ARGUMENT as Start for keys.
  static absl::StatusOr<std::unique_ptr<BatchUploadSession>> FromSessions(
      std::vector<std::string> keys, std::vector<std::unique_ptr<UploadSession>> sessions);

  size_t num_arrays() const { return sessions_.size(); }

  // Appends `bytes` to array `array_index`. INVALID_ARGUMENT (and the
  // session aborts) for an index out of range or going backwards, an earlier
  // array left incomplete when moving on, or too many bytes.
  absl::Status Write(int64_t array_index, absl::string_view bytes);

  // Checks every array's byte count, then publishes all of them. Returns
  // (key, tensor) in header order. On error nothing is published.
  absl::StatusOr<std::vector<std::pair<std::string, std::shared_ptr<const Tensor>>>> Commit();

  void Abort();

 private:
  BatchUploadSession(std::vector<std::string> keys,
                     std::vector<std::unique_ptr<UploadSession>> sessions)
      : keys_(std::move(keys)), sessions_(std::move(sessions)) {}
  std::string Label(size_t index) const;

  std::vector<std::string> keys_;
  std::vector<std::unique_ptr<UploadSession>> sessions_;  // empty once done
  size_t current_ = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_BATCH_UPLOAD_SESSION_H_
