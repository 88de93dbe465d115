// PeerCall: one call to another daemon's PeerService -- the stub, a client
// context with the daemon's credentials (PeerChannels) and a deadline, and
// registration with Cluster::CallGuard so the call is cancelled when
// membership loses the process. Finish turns the outcome into the daemon's status: a call
// cut short because the process was lost reads "process 1 (HOST:PORT) is
// lost (epoch 4)" (UNAVAILABLE); other transport failures are UNAVAILABLE
// naming the process; the peer's own errors keep their codes and text.
// Both kinds of transport failure are marked (MarkUnreachable,
// server/cluster/fan_out.h): they are evidence that this process vanished,
// which FanOut prefers over other daemons' consequences of the same loss.
//
// One call per object; not thread-safe.
#ifndef PLACEMENT_SERVER_PEER_PEER_CALL_H_
#define PLACEMENT_SERVER_PEER_PEER_CALL_H_

#include <memory>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/peer_service.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/peer/peer_channels.h"

namespace placement::server {

class PeerCall {
 public:
  // REQUIRES: channels and cluster outlive the call.
  PeerCall(PeerChannels* channels, Cluster* cluster, int32_t process, absl::Duration timeout);
  ~PeerCall();

  placement::v1::PeerService::Stub* stub() { return stub_.get(); }
  grpc::ClientContext* context() { return &context_; }
  int32_t process() const { return process_; }

  absl::Status Finish(const grpc::Status& status);

 private:
  Cluster* cluster_;
  int32_t process_;
  grpc::ClientContext context_;
  std::unique_ptr<placement::v1::PeerService::Stub> stub_;
  std::unique_ptr<Cluster::CallGuard> guard_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_PEER_CALL_H_
