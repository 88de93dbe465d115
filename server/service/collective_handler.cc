#include "server/service/collective_handler.h"

#include <chrono>
#include <memory>
#include <utility>

#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "server/convert/collective_request_proto.h"
#include "server/service/creating_reactor.h"
#include "server/service/from_proto.h"
#include "server/service/to_proto.h"
#include "server/tensor/label_limits.h"
#include "server/tensor/tenant_access.h"

namespace placement::server {
namespace {

namespace pb = placement::v1;

// The ids of the tensors a response hands to the caller.
std::vector<std::string> CreatedIds(const pb::CollectiveResponse& response) {
  if (response.tensor().id().empty()) return {};
  return {response.tensor().id()};
}
std::vector<std::string> CreatedIds(const pb::AllReduceBatchResponse& response) {
  std::vector<std::string> ids;
  for (const auto& tensor : response.tensors()) ids.push_back(tensor.id());
  return ids;
}

// Admits the call, then runs `fn` (returning absl::Status) and finishes the
// reactor: on this gRPC thread when the core says the collective is quick,
// otherwise on `dispatch`. The gate ticket lives until the call is done.
template <typename Response, typename Fn>
grpc::ServerUnaryReactor* RunAdmitted(grpc::CallbackServerContext* context, CallGate& gate,
                                      const CollectiveServiceCore& core, WorkerPool& dispatch,
                                      const std::vector<std::string>& tensor_ids,
                                      const Response* response, Fn fn) {
  // Results the caller did not receive are deleted (creating_reactor.h).
  auto* reactor = new CreatingUnaryReactor(context, core.store());
  auto ticket = std::make_shared<CallGate::Ticket>();
  absl::StatusOr<Caller> admitted = gate.Admit(*context, ticket.get());
  if (!admitted.ok()) {
    reactor->FinishCreating(admitted.status(), {});
    return reactor;
  }
  // Names resolve to ids; another tenant's tensors are unknown ids here too.
  absl::StatusOr<std::vector<std::string>> ids =
      ResolveTensorIds(*core.store(), *admitted, tensor_ids, "tensor_ids");
  if (!ids.ok()) {
    reactor->FinishCreating(ids.status(), {});
    return reactor;
  }
  const bool quick = core.IsQuick(*ids);
  // Runs the collective and hands its results to the caller's session.
  auto run = [&gate, response, caller = *admitted, ids = *std::move(ids),
              fn = std::move(fn)]() mutable {
    absl::Status status = fn(caller, std::move(ids));
    std::vector<std::string> created;
    if (status.ok()) created = CreatedIds(*response);
    if (status.ok()) status = gate.AdoptCreated(caller, created);
    return std::make_pair(std::move(status), std::move(created));
  };
  if (quick) {
    auto [status, created] = run();
    reactor->FinishCreating(std::move(status), std::move(created));
    return reactor;
  }
  dispatch.Submit([reactor, ticket, run = std::move(run)]() mutable {
    auto [status, created] = run();
    reactor->FinishCreating(std::move(status), std::move(created));
    ticket->Reset();
  });
  return reactor;
}

CollectiveContext ContextOf(grpc::CallbackServerContext* context) {
  CollectiveContext out;
  out.cancelled = [context] { return context->IsCancelled(); };
  const auto deadline = context->deadline();
  if (deadline != std::chrono::system_clock::time_point::max()) {
    out.deadline = absl::FromChrono(deadline);
  }
  return out;
}

}  // namespace

CollectiveHandler::CollectiveHandler(const CollectiveServiceCore* core, WorkerPool* dispatch,
                                     CallGate* gate)
    : core_(core), dispatch_(dispatch), gate_(gate) {
  SetMessageAllocatorFor_AllReduce(&all_reduce_messages_);
  SetMessageAllocatorFor_AllReduceBatch(&all_reduce_batch_messages_);
  SetMessageAllocatorFor_AllGather(&all_gather_messages_);
  SetMessageAllocatorFor_ReduceScatter(&reduce_scatter_messages_);
  SetMessageAllocatorFor_Broadcast(&broadcast_messages_);
}

absl::Status CollectiveHandler::Execute(const Caller& caller, const CollectiveRequest& request,
                                        grpc::CallbackServerContext* context,
                                        std::vector<std::shared_ptr<const Tensor>>* out) const {
  ASSIGN_OR_RETURN(*out, core_->Execute(request, caller.tenant, ContextOf(context)));
  return absl::OkStatus();
}

namespace {

void WriteResults(const std::vector<std::shared_ptr<const Tensor>>& out,
                  pb::CollectiveResponse* response) {
  TensorToProto(*out.front(), response->mutable_tensor());
}

void WriteResults(const std::vector<std::shared_ptr<const Tensor>>& out,
                  pb::AllReduceBatchResponse* response) {
  for (const auto& tensor : out) TensorToProto(*tensor, response->add_tensors());
}

}  // namespace

template <typename Response>
grpc::ServerUnaryReactor* CollectiveHandler::Serve(grpc::CallbackServerContext* context,
                                                   const std::vector<std::string>& tensor_ids,
                                                   absl::StatusOr<CollectiveRequest> request,
                                                   Response* response) {
  // A request that does not convert fails after admission and name
  // resolution, as every call's errors are ordered.
  return RunAdmitted(
      context, *gate_, *core_, *dispatch_, tensor_ids, response,
      [=, this, request = std::move(request)](
          const Caller& caller, std::vector<std::string> ids) mutable -> absl::Status {
        if (!request.ok()) return request.status();
        request->tensor_ids = std::move(ids);  // the ids the ids or names resolved to
        std::vector<std::shared_ptr<const Tensor>> out;
        RETURN_IF_ERROR(Execute(caller, *request, context, &out));
        WriteResults(out, response);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* CollectiveHandler::AllReduce(grpc::CallbackServerContext* context,
                                                       const pb::AllReduceRequest* request,
                                                       pb::CollectiveResponse* response) {
  return Serve(context, {request->tensor_id()}, CollectiveRequestFromProto(*request), response);
}

grpc::ServerUnaryReactor* CollectiveHandler::AllReduceBatch(
    grpc::CallbackServerContext* context, const pb::AllReduceBatchRequest* request,
    pb::AllReduceBatchResponse* response) {
  return Serve(context, {request->tensor_ids().begin(), request->tensor_ids().end()},
               CollectiveRequestFromProto(*request), response);
}

grpc::ServerUnaryReactor* CollectiveHandler::AllGather(grpc::CallbackServerContext* context,
                                                       const pb::AllGatherRequest* request,
                                                       pb::CollectiveResponse* response) {
  return Serve(context, {request->tensor_id()}, CollectiveRequestFromProto(*request), response);
}

grpc::ServerUnaryReactor* CollectiveHandler::ReduceScatter(grpc::CallbackServerContext* context,
                                                           const pb::ReduceScatterRequest* request,
                                                           pb::CollectiveResponse* response) {
  return Serve(context, {request->tensor_id()}, CollectiveRequestFromProto(*request), response);
}

grpc::ServerUnaryReactor* CollectiveHandler::Broadcast(grpc::CallbackServerContext* context,
                                                       const pb::BroadcastRequest* request,
                                                       pb::CollectiveResponse* response) {
  return Serve(context, {request->tensor_id()}, CollectiveRequestFromProto(*request), response);
}

// Out of line: constructing or destroying the handler instantiates gRPC's
// handler templates for each of its methods, in this file only.
CollectiveHandler::~CollectiveHandler() = default;

}  // namespace placement::server
