// The streaming calls to another daemon's PeerService, behind core types:
// ReadBox as a RemoteBoxStream and WriteShards as a PeerShardStream. Both
// register with Cluster::CallGuard (cancelled when the daemon is lost) and
// report failures like PeerCall ("process 1 (HOST:PORT) is lost").
//
// Each stream belongs to one caller; not thread-safe.
#ifndef PLACEMENT_SERVER_PEER_PEER_STREAMS_H_
#define PLACEMENT_SERVER_PEER_PEER_STREAMS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/region.h"
#include "server/cluster/cluster.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"

namespace placement::server {

// ReadBox(tensor_id, device_id, box) on `process`, bounded by `timeout`.
absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenPeerBox(Cluster* cluster, int32_t process,
                                                             const std::string& tensor_id,
                                                             int64_t device_id, const Box& box,
                                                             absl::Duration timeout);

// WriteShards to `process`: the header (the tensor's record) goes at Open.
class PeerShardStream {
 public:
  static absl::StatusOr<std::unique_ptr<PeerShardStream>> Open(Cluster* cluster, int32_t process,
                                                               const Tensor& record,
                                                               absl::Duration pending_lifetime,
                                                               absl::Duration timeout);
  ~PeerShardStream();

  // One ShardWrite message: `runs` (src_offset into `chunk`, dst_offset into
  // the shard) for the shards of `device_ids`.
  absl::Status Write(absl::Span<const int64_t> device_ids, absl::Span<const ByteRun> runs,
                     const char* chunk);
  // Ends the stream; OK when the daemon holds its shards complete (pending).
  absl::Status Finish();
  // Cancels the stream; the daemon frees what it allocated.
  void Cancel();

 private:
  struct State;
  explicit PeerShardStream(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_STREAMS_H_
