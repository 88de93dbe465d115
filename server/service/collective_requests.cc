#include "server/service/collective_requests.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "server/cluster/cluster_collectives.h"
#include "server/peer/peer_client.h"
#include "server/service/from_proto.h"
#include "server/tensor/label_limits.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

template <typename Request>
absl::StatusOr<CollectiveTarget> TargetOf(const Request& request, const CollectiveCommit* commit) {
  CollectiveTarget target;
  target.tensor_id = request.tensor_id();
  if (target.tensor_id.empty()) return absl::InvalidArgumentError("tensor_id must be set");
  target.axes.assign(request.axes().begin(), request.axes().end());
  ASSIGN_OR_RETURN(target.source, SourceHandlingFromProto(request.source()));
  RETURN_IF_ERROR(CheckLength("name", request.name(), kMaxTensorNameLength));
  target.name = request.name();
  target.commit = commit;
  return target;
}

using Results = std::vector<std::shared_ptr<const Tensor>>;

absl::StatusOr<Results> One(absl::StatusOr<std::shared_ptr<const Tensor>> t) {
  if (!t.ok()) return t.status();
  return Results{*std::move(t)};
}

struct Facts {
  int controller = pb::CONTROLLER_UNSPECIFIED;
  int source = pb::SOURCE_HANDLING_UNSPECIFIED;
  std::string kind;
};

Facts FactsOf(const pb::CollectiveOp& op) {
  switch (op.request_case()) {
    case pb::CollectiveOp::kAllReduce:
      return {op.all_reduce().controller(), op.all_reduce().source(), "all_reduce"};
    case pb::CollectiveOp::kAllReduceBatch:
      return {op.all_reduce_batch().controller(), op.all_reduce_batch().source(),
              "all_reduce_batch"};
    case pb::CollectiveOp::kAllGather:
      return {op.all_gather().controller(), op.all_gather().source(), "all_gather"};
    case pb::CollectiveOp::kReduceScatter:
      return {op.reduce_scatter().controller(), op.reduce_scatter().source(), "reduce_scatter"};
    case pb::CollectiveOp::kBroadcast:
      return {op.broadcast().controller(), op.broadcast().source(), "broadcast"};
    case pb::CollectiveOp::REQUEST_NOT_SET:
      break;
  }
  return {};
}

}  // namespace

std::vector<std::string> CollectiveInputs(const pb::CollectiveOp& op) {
  switch (op.request_case()) {
    case pb::CollectiveOp::kAllReduce:
      return {op.all_reduce().tensor_id()};
    case pb::CollectiveOp::kAllReduceBatch:
      return {op.all_reduce_batch().tensor_ids().begin(), op.all_reduce_batch().tensor_ids().end()};
    case pb::CollectiveOp::kAllGather:
      return {op.all_gather().tensor_id()};
    case pb::CollectiveOp::kReduceScatter:
      return {op.reduce_scatter().tensor_id()};
    case pb::CollectiveOp::kBroadcast:
      return {op.broadcast().tensor_id()};
    case pb::CollectiveOp::REQUEST_NOT_SET:
      break;
  }
  return {};
}

absl::StatusOr<Results> RunCollectiveOp(const CollectiveServiceCore& core,
                                        const pb::CollectiveOp& op,
                                        const CollectiveContext& context,
                                        const CollectiveCommit* commit) {
  switch (op.request_case()) {
    case pb::CollectiveOp::kAllReduce: {
      const pb::AllReduceRequest& r = op.all_reduce();
      ASSIGN_OR_RETURN(CollectiveTarget target, TargetOf(r, commit));
      ASSIGN_OR_RETURN(std::optional<ReduceOp> reduce, RequestedReduceOp(r.op(), r.op_name()));
      return One(core.AllReduce(target, reduce, context));
    }
    case pb::CollectiveOp::kAllReduceBatch: {
      const pb::AllReduceBatchRequest& r = op.all_reduce_batch();
      std::vector<std::string> ids(r.tensor_ids().begin(), r.tensor_ids().end());
      std::vector<std::string> axes(r.axes().begin(), r.axes().end());
      ASSIGN_OR_RETURN(std::optional<ReduceOp> reduce, RequestedReduceOp(r.op(), r.op_name()));
      ASSIGN_OR_RETURN(SourceHandling source, SourceHandlingFromProto(r.source()));
      return core.AllReduceBatch(ids, axes, reduce, source, context, commit);
    }
    case pb::CollectiveOp::kAllGather: {
      ASSIGN_OR_RETURN(CollectiveTarget target, TargetOf(op.all_gather(), commit));
      return One(core.AllGather(target, op.all_gather().dim(), context));
    }
    case pb::CollectiveOp::kReduceScatter: {
      const pb::ReduceScatterRequest& r = op.reduce_scatter();
      ASSIGN_OR_RETURN(CollectiveTarget target, TargetOf(r, commit));
      ASSIGN_OR_RETURN(std::optional<ReduceOp> reduce, RequestedReduceOp(r.op(), r.op_name()));
      return One(core.ReduceScatter(target, reduce, r.scatter_dim(), context));
    }
    case pb::CollectiveOp::kBroadcast: {
      ASSIGN_OR_RETURN(CollectiveTarget target, TargetOf(op.broadcast(), commit));
      return One(core.Broadcast(target, op.broadcast().root_device_id(), context));
    }
    case pb::CollectiveOp::REQUEST_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("the collective request is empty");
}

absl::StatusOr<Results> ExecuteCollective(const CollectiveServiceCore& core,
                                          ClusterCollectives* cluster, PeerClient* peers,
                                          const Caller& caller, const pb::CollectiveOp& op,
                                          const CollectiveContext& context) {
  const Facts facts = FactsOf(op);
  if (facts.controller != pb::CONTROLLER_UNSPECIFIED && facts.controller != pb::CONTROLLER_SINGLE &&
      facts.controller != pb::CONTROLLER_MULTI) {
    return absl::InvalidArgumentError(
        absl::StrCat("controller is ", facts.controller,
                     "; expected CONTROLLER_SINGLE (1) or CONTROLLER_MULTI (2)"));
  }
  const bool multi = facts.controller == pb::CONTROLLER_MULTI;
  if (cluster == nullptr) {
    if (multi) {
      // One daemon is one controller: MULTI means nothing more here.
    }
    return RunCollectiveOp(core, op, context, nullptr);
  }
  const std::vector<std::string> inputs = CollectiveInputs(op);
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> tensors =
      core.store()->GetMany(inputs);
  if (!tensors.ok() || tensors->empty()) return RunCollectiveOp(core, op, context, nullptr);
  bool spans = false;
  std::vector<int32_t> participants;
  for (const auto& t : *tensors) {
    spans |= !t->all_local();
    for (int32_t p : cluster->ParticipantsOf(*t)) participants.push_back(p);
  }
  std::sort(participants.begin(), participants.end());
  participants.erase(std::unique(participants.begin(), participants.end()), participants.end());
  // Released before running: DONATE takes an input only when nothing else
  // holds it.
  tensors->clear();
  if (!spans && !multi) return RunCollectiveOp(core, op, context, nullptr);
  const size_t num_results = inputs.size();
  const std::vector<std::string> donated =
      facts.source == pb::SOURCE_HANDLING_DONATE ? inputs : std::vector<std::string>{};
  ClusterCollectives::RunPart run_here = [&core, &op](const CollectiveContext& ctx,
                                                      const CollectiveCommit& commit) {
    return RunCollectiveOp(core, op, ctx, &commit);
  };
  if (multi) {
    const std::string key =
        absl::StrCat(caller.tenant, "/", absl::StrJoin(inputs, ","), "/", facts.kind);
    return cluster->RunMulti(key, op.SerializeAsString(), participants, num_results, run_here,
                             donated, context);
  }
  ClusterCollectives::RemotePart remote =
      [peers, &op](int32_t p, const std::string& op_key, const std::vector<int32_t>& members,
                   const std::vector<std::string>& ids, const CrossProcessTicket& ticket) {
        return peers->PrepareCollective(p, op, op_key, members, ids, ticket);
      };
  return cluster->Drive(participants, num_results, run_here, remote, donated, context);
}

}  // namespace placement::server
