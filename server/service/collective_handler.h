// gRPC front for placement.v1.CollectiveService: converts each request to
// the core's CollectiveRequest and runs it through
// CollectiveServiceCore::Execute (which, in a cluster, hands requests that
// span daemons to the cluster); the results back to protos. No logic of
// its own.
//
// A collective can run for a while (hundreds of MiB through the engine), so
// the handler does not block a gRPC callback thread on it: the call is
// admitted through the CallGate, queued on `dispatch` (a small pool owned by
// the ServiceSet), and the reactor is finished from there. Quick ones
// (CollectiveServiceCore::IsQuick: at most 256 KiB per device) run inline,
// saving the hand-off. The call's cancellation (client cancel, disconnect,
// server shutdown) and deadline are polled by the engine between chunks.
//
// Thread-safe (the components are).
#ifndef PLACEMENT_SERVER_SERVICE_COLLECTIVE_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_COLLECTIVE_HANDLER_H_

#include "placement/v1/collective_service.grpc.pb.h"
#include "server/collective/collective_service_core.h"
#include "server/common/worker_pool.h"
#include "server/service/arena_messages.h"
#include "server/service/call_gate.h"

namespace placement::server {

class CollectiveHandler final : public placement::v1::CollectiveService::CallbackService {
 public:
  // REQUIRES: core, dispatch and gate outlive the handler; dispatch has at
  // least one thread.
  CollectiveHandler(const CollectiveServiceCore* core, WorkerPool* dispatch, CallGate* gate);
  ~CollectiveHandler() override;
  grpc::ServerUnaryReactor* AllReduce(grpc::CallbackServerContext* context,
                                      const placement::v1::AllReduceRequest* request,
                                      placement::v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* AllReduceBatch(
      grpc::CallbackServerContext* context, const placement::v1::AllReduceBatchRequest* request,
      placement::v1::AllReduceBatchResponse* response) override;
  grpc::ServerUnaryReactor* AllGather(grpc::CallbackServerContext* context,
                                      const placement::v1::AllGatherRequest* request,
                                      placement::v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* ReduceScatter(grpc::CallbackServerContext* context,
                                          const placement::v1::ReduceScatterRequest* request,
                                          placement::v1::CollectiveResponse* response) override;
  grpc::ServerUnaryReactor* Broadcast(grpc::CallbackServerContext* context,
                                      const placement::v1::BroadcastRequest* request,
                                      placement::v1::CollectiveResponse* response) override;

 private:
  // Admits the call and runs `op` (on the dispatch pool unless quick),
  // writing its results into `response`.
  template <typename Response>
  grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context,
                                  const std::vector<std::string>& tensor_ids,
                                  absl::StatusOr<CollectiveRequest> request, Response* response);
  absl::Status Execute(const Caller& caller, const CollectiveRequest& request,
                       grpc::CallbackServerContext* context,
                       std::vector<std::shared_ptr<const Tensor>>* out) const;

  const CollectiveServiceCore* core_;
  WorkerPool* dispatch_;
  CallGate* gate_;
  // Every method's request and response live on one arena per call.
  ArenaMessages<placement::v1::AllReduceRequest, placement::v1::CollectiveResponse>
      all_reduce_messages_;
  ArenaMessages<placement::v1::AllReduceBatchRequest, placement::v1::AllReduceBatchResponse>
      all_reduce_batch_messages_;
  ArenaMessages<placement::v1::AllGatherRequest, placement::v1::CollectiveResponse>
      all_gather_messages_;
  ArenaMessages<placement::v1::ReduceScatterRequest, placement::v1::CollectiveResponse>
      reduce_scatter_messages_;
  ArenaMessages<placement::v1::BroadcastRequest, placement::v1::CollectiveResponse>
      broadcast_messages_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_COLLECTIVE_HANDLER_H_
