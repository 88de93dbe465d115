// Helpers shared by the callback-API handlers: admit the call through the
// CallGate, run the core call, convert absl::Status to grpc::Status.
#ifndef PLACEMENT_SERVER_SERVICE_UNARY_H_
#define PLACEMENT_SERVER_SERVICE_UNARY_H_

#include <utility>

#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/service/call_gate.h"

namespace placement::server {

// Runs `fn` (returning absl::Status) for a unary callback RPC and finishes
// the default reactor with its status. UNAVAILABLE while draining.
template <typename Fn>
grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, CallGate& gate, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallGate::Ticket ticket;
  absl::Status status = gate.Enter(&ticket);
  if (status.ok()) status = std::forward<Fn>(fn)();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_UNARY_H_
