// Helpers shared by the callback-API handlers: admit the call through the
// CallGate (draining, authentication), run the core call, convert
// absl::Status to grpc::Status.
#ifndef PLACEMENT_SERVER_SERVICE_UNARY_H_
#define PLACEMENT_SERVER_SERVICE_UNARY_H_

#include <type_traits>
#include <utility>

#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "server/auth/caller.h"
#include "server/service/call_gate.h"
#include "server/service/creating_reactor.h"

namespace placement::server {

// Runs `fn` (returning absl::Status; taking the authenticated `const Caller&`
// or nothing) for a unary callback RPC and finishes the default reactor with
// its status. UNAVAILABLE while draining; UNAUTHENTICATED / PERMISSION_DENIED
// when the call's credentials are refused (fn does not run).
template <typename Fn>
grpc::ServerUnaryReactor* RunUnary(grpc::CallbackServerContext* context, CallGate& gate, Fn&& fn) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  CallGate::Ticket ticket;
  absl::StatusOr<Caller> caller = gate.Admit(*context, &ticket);
  absl::Status status = caller.status();
  if (status.ok()) {
    if constexpr (std::is_invocable_v<Fn, const Caller&>) {
      status = std::forward<Fn>(fn)(*caller);
    } else {
      status = std::forward<Fn>(fn)();
    }
  }
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// RunUnary for calls that create tensors: `fn(caller, &created)` appends the
// ids it committed; they are deleted when the call was cancelled before or
// while its response was delivered (creating_reactor.h).
template <typename Fn>
grpc::ServerUnaryReactor* RunCreating(grpc::CallbackServerContext* context, CallGate& gate,
                                      TensorStore* store, Fn&& fn) {
  auto* reactor = new CreatingUnaryReactor(context, store);
  CallGate::Ticket ticket;
  absl::StatusOr<Caller> caller = gate.Admit(*context, &ticket);
  std::vector<std::string> created;
  absl::Status status = caller.status();
  if (status.ok()) status = std::forward<Fn>(fn)(*caller, &created);
  if (status.ok()) status = gate.AdoptCreated(*caller, created);
  reactor->FinishCreating(std::move(status), std::move(created));
  return reactor;
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_UNARY_H_
