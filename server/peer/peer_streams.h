// The streaming calls to another daemon's PeerService, behind the cluster
// layer's types (PeerClient hands them out as PeerTransport::OpenBox /
// OpenShardWriter): ReadBox as a RemoteBoxStream and WriteShards as a
// PeerShardWriter. Both register with Cluster::CallGuard (cancelled when
// the daemon is lost) and report failures like PeerCall ("process 1
// (HOST:PORT) is lost").
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
#include "server/cluster/peer_transport.h"
#include "server/peer/peer_channels.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor.h"

namespace placement::server {

// ReadBox(tensor_id, device_id, box) on `process`, bounded by `timeout`.
absl::StatusOr<std::unique_ptr<RemoteBoxStream>> OpenPeerBox(PeerChannels* channels,
                                                             Cluster* cluster, int32_t process,
                                                             const std::string& tensor_id,
                                                             int64_t device_id, const Box& box,
                                                             absl::Duration timeout);

// WriteShards to `process`: the header (the tensor's record) goes at open.
absl::StatusOr<std::unique_ptr<PeerShardWriter>> OpenPeerShardWriter(
    PeerChannels* channels, Cluster* cluster, int32_t process, const Tensor& record,
    absl::Duration pending_lifetime, absl::Duration timeout);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_STREAMS_H_
