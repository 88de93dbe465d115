// RunPeerUnary: RunUnary (unary.h) for the daemon-to-daemon services
// (ClusterService, PeerService). Their gate is the peer gate, which never
// refuses calls while the cluster forms (forming needs them); with
// authentication on, only callers of role peer or admin get in
// (PERMISSION_DENIED otherwise: a trainer's token must not drive peers).
#ifndef PLACEMENT_SERVER_SERVICE_PEER_UNARY_H_
#define PLACEMENT_SERVER_SERVICE_PEER_UNARY_H_

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/common/worker_pool.h"
#include "server/service/call_gate.h"

namespace placement::server {

// Trailing metadata on every answer of the daemon-to-daemon services, so a
// caller can tell an error the daemon chose from a transport failure of the
// same code (peer_call.h, coordinator_client.h).
inline constexpr char kPeerAnswerKey[] = "placement-peer-answer";

// The caller of a peer call, or the refusal.
inline absl::StatusOr<Caller> AdmitPeer(CallGate& gate, const grpc::ServerContextBase& context,
                                        CallGate::Ticket* ticket) {
  absl::StatusOr<Caller> caller = gate.Admit(context, ticket);
  if (!caller.ok()) return caller;
  if (caller->identity != "anonymous" && !caller->admin() && caller->role != Role::kPeer) {
    *ticket = CallGate::Ticket();
    return absl::PermissionDeniedError(
        absl::StrCat(caller->identity,
                     " may not call the daemon-to-daemon services; they need role peer "
                     "or admin in --auth_file"));
  }
  return caller;
}

template <typename Fn>
grpc::ServerUnaryReactor* RunPeerUnary(grpc::CallbackServerContext* context, CallGate& gate,
                                       Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallGate::Ticket ticket;
  absl::StatusOr<Caller> caller = AdmitPeer(gate, *context, &ticket);
  absl::Status status = caller.status();
  if (status.ok()) status = std::forward<Fn>(fn)();
  context->AddTrailingMetadata(kPeerAnswerKey, "1");
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// RunPeerUnary for calls that wait (Join, KeyValueGet, Barrier): `fn` runs
// on `pool`, so waiting calls never hold gRPC's callback threads. The gate
// ticket lives until `fn` returns.
template <typename Fn>
grpc::ServerUnaryReactor* RunPeerBlocking(grpc::CallbackServerContext* context, CallGate& gate,
                                          WorkerPool& pool, Fn fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto ticket = std::make_shared<CallGate::Ticket>();
  absl::StatusOr<Caller> caller = AdmitPeer(gate, *context, ticket.get());
  context->AddTrailingMetadata(kPeerAnswerKey, "1");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  pool.Submit([reactor, ticket, fn = std::move(fn)]() mutable {
    reactor->Finish(ToGrpcStatus(fn()));
    ticket->Reset();
  });
  return reactor;
}

// RunPeerUnary for calls that wait without a thread (the coordinator's
// Join, KeyValueGet, Barrier): `start(finish)` begins the wait and returns;
// whoever ends it calls `finish(status)` exactly once, from any thread,
// after filling the response. The gate ticket lives until then.
template <typename Start>
grpc::ServerUnaryReactor* RunPeerAsync(grpc::CallbackServerContext* context, CallGate& gate,
                                       Start start) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto ticket = std::make_shared<CallGate::Ticket>();
  absl::StatusOr<Caller> caller = AdmitPeer(gate, *context, ticket.get());
  context->AddTrailingMetadata(kPeerAnswerKey, "1");
  if (!caller.ok()) {
    reactor->Finish(ToGrpcStatus(caller.status()));
    return reactor;
  }
  start([reactor, ticket](const absl::Status& status) {
    reactor->Finish(ToGrpcStatus(status));
    ticket->Reset();
  });
  return reactor;
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_PEER_UNARY_H_
