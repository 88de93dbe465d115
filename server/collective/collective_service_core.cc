#include "server/collective/collective_service_core.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/collective/collective_staging.h"
#include "server/tensor/derived_name.h"

namespace placement::server {
namespace {

TensorLayout LayoutOf(const Tensor& t) { return TensorLayout{t.dtype, t.shape, t.sharding}; }

// The op a request means: its own, else the input's partial op, else SUM.
ReduceOp EffectiveOp(std::optional<ReduceOp> op, const Tensor& t) {
  if (op.has_value()) return *op;
  if (t.partial_op.has_value() && !t.sharding.partial_axes().empty()) return *t.partial_op;
  return ReduceOp::kSum;
}

absl::Status CheckReducible(const Tensor& t, CollectiveKind kind) {
  if (t.dtype != DType::kBool) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(CollectiveKindName(kind), ": tensor '", t.id,
                                                 "' has dtype bool, which cannot be reduced"));
}

// One item per group, described globally by the mesh's device ids; rank r
// of a group is the shard at its r-th mesh position. Ranks whose shard is
// on another daemon of a cluster are that daemon's contribution; an item
// with none of this daemon's ranks is left out (the cluster engine knows
// which items each daemon runs).
std::vector<CollectiveItem> ItemsFor(const CollectivePlan& plan, const Mesh& mesh, DType dtype,
                                     ReduceOp op, const std::vector<const DeviceBuffer*>& send,
                                     const std::vector<DeviceBuffer*>& recv) {
  std::vector<CollectiveItem> items;
  items.reserve(plan.groups.size());
  for (const std::vector<int64_t>& group : plan.groups) {
    CollectiveItem item;
    item.dtype = dtype;
    item.op = op;
    item.root = plan.root_rank;
    item.group.reserve(group.size());
    item.local.reserve(group.size());
    for (size_t r = 0; r < group.size(); ++r) {
      const int64_t position = group[r];
      item.group.push_back(mesh.device_ids()[position]);
      if (recv[position] == nullptr) continue;  // another daemon's rank
      item.local.push_back(RankBuffers{static_cast<int32_t>(r), send[position], recv[position]});
    }
    if (!item.local.empty()) items.push_back(std::move(item));
  }
  return items;
}

std::vector<const DeviceBuffer*> SendBuffers(const Tensor& t) {
  std::vector<const DeviceBuffer*> out;
  for (const Shard& s : t.shards) out.push_back(s.buffer.get());
  return out;
}

std::vector<DeviceBuffer*> RecvBuffers(Tensor& t) {
  std::vector<DeviceBuffer*> out;
  for (Shard& s : t.shards) out.push_back(s.buffer.get());
  return out;
}

// partial_op of a result: the input's while partial axes remain.
std::optional<ReduceOp> ResultPartialOp(const Tensor& input, const CollectivePlan& plan) {
  if (plan.result_sharding.partial_axes().empty()) return std::nullopt;
  return input.partial_op;
}

// Turns a donated input whose buffers now hold the result into the result.
absl::Status BecomeResult(Tensor* t, const CollectivePlan& plan, const std::string& name) {
  for (size_t i = 0; i < plan.result_domains.size(); ++i) {
    t->shards[i].domain = plan.result_domains[i];
  }
  t->partial_op = ResultPartialOp(*t, plan);
  t->shape = plan.result_shape;
  t->sharding = plan.result_sharding;
  if (!name.empty()) t->name = name;
  return absl::OkStatus();
}

// `donated`: the input goes once the result exists, which takes its name.
absl::StatusOr<std::unique_ptr<Tensor>> AllocateResult(TensorStore* store, const Tensor& input,
                                                       const CollectivePlan& plan,
                                                       const std::string& name, bool donated) {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> result,
      store->AllocateOver(
          input.dtype, plan.result_shape, plan.result_sharding, plan.result_domains, input.mesh_id,
          DerivedTensorName(name, input.name, CollectiveKindName(plan.kind), donated),
          input.owner));
  result->partial_op = ResultPartialOp(input, plan);
  return result;
}

absl::Status SameSizes(const Tensor& input, const Tensor& result) {
  for (size_t i = 0; i < input.shards.size(); ++i) {
    if (!input.shards[i].local() || !result.shards[i].local()) continue;
    if (input.shards[i].buffer->size() != result.shards[i].buffer->size()) {
      return absl::InternalError(
          absl::StrCat("collective result shard ", i, " is ", result.shards[i].buffer->size(),
                       " bytes but the input's is ", input.shards[i].buffer->size()));
    }
  }
  return absl::OkStatus();
}

absl::Status WithIndex(const absl::Status& status, size_t i) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("tensor_ids[", i, "]: ", status.message()));
}

}  // namespace

CollectiveServiceCore::CollectiveServiceCore(TensorStore* store, CollectiveEngine* engine,
                                             Metrics* metrics)
    : store_(store), engine_(engine), metrics_(metrics) {
  if (metrics_ == nullptr) return;
  std::vector<MetricLabels> kinds;
  for (CollectiveKind kind : {CollectiveKind::kAllReduce, CollectiveKind::kAllGather,
                              CollectiveKind::kReduceScatter, CollectiveKind::kBroadcast}) {
    kinds.push_back({{"collective", std::string(CollectiveKindName(kind))}});
  }
  metrics_->Describe("placementd_collectives_total", "counter",
                     "Collectives completed, by collective.", kinds);
  metrics_->Describe("placementd_collective_bytes_total", "counter",
                     "Device bytes of the inputs of completed collectives, by collective.", kinds);
  for (size_t k = 0; k < kinds.size(); ++k) {
    counted_[k] = metrics_->Counter("placementd_collectives_total", kinds[k]);
    counted_bytes_[k] = metrics_->Counter("placementd_collective_bytes_total", kinds[k]);
  }
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::Publish(
    std::unique_ptr<Tensor> result, size_t index, const CollectiveCommit* commit) const {
  if (commit != nullptr) return (*commit)(std::move(result), index);
  return store_->Commit(std::move(result));
}

void CollectiveServiceCore::Count(CollectiveKind kind, int64_t device_bytes) const {
  // Default series (no Metrics) ignore the updates.
  const size_t k = static_cast<size_t>(kind);
  counted_[k].Add(1);
  counted_bytes_[k].Add(static_cast<double>(device_bytes));
}

bool CollectiveServiceCore::IsQuick(const std::vector<std::string>& tensor_ids) const {
  // Only engines that finish small calls in microseconds qualify; NCCL may
  // build a communicator first, which must not block a gRPC thread.
  if (!engine_->CompletesInline()) return false;
  absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> tensors = store_->GetMany(tensor_ids);
  if (!tensors.ok()) return true;
  int64_t bytes = 0;
  for (const auto& t : *tensors) {
    int64_t largest = 0;
    for (const Shard& s : t->shards) {
      if (s.local()) largest = std::max(largest, s.buffer->size());
    }
    bytes += largest;
  }
  return bytes <= kQuickBytesPerDevice;
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::AllReduce(
    const CollectiveTarget& target, std::optional<ReduceOp> op,
    const CollectiveContext& context) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> input, store_->Get(target.tensor_id));
  RETURN_IF_ERROR(CheckReducible(*input, CollectiveKind::kAllReduce));
  ASSIGN_OR_RETURN(std::shared_ptr<const CollectivePlan> plan,
                   plans_.Plan({CollectiveKind::kAllReduce, target.axes}, LayoutOf(*input)));
  const ReduceOp effective = EffectiveOp(op, *input);
  return RunSameSize(target, std::move(input), *plan, effective, context);
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::Broadcast(
    const CollectiveTarget& target, int64_t root_device_id,
    const CollectiveContext& context) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> input, store_->Get(target.tensor_id));
  bool known = store_->IsRemote(root_device_id);  // a device of another daemon
  for (const DeviceDescription& d : store_->backend()->Devices())
    known = known || d.id == root_device_id;
  if (!known) {
    return absl::NotFoundError(absl::StrCat("broadcast: root device ", root_device_id,
                                            " does not exist on this daemon (",
                                            store_->backend()->Devices().size(), " devices)"));
  }
  const Mesh& mesh = input->sharding.mesh();
  const int64_t root_position = mesh.PositionOf(root_device_id);
  if (root_position < 0) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast: root device ", root_device_id,
                                                   " is not in the tensor's mesh ",
                                                   mesh.DebugString()));
  }
  ASSIGN_OR_RETURN(
      std::shared_ptr<const CollectivePlan> plan,
      plans_.Plan({CollectiveKind::kBroadcast, target.axes, 0, root_position}, LayoutOf(*input)));
  return RunSameSize(target, std::move(input), *plan, ReduceOp::kSum, context);
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::AllGather(
    const CollectiveTarget& target, int64_t dim, const CollectiveContext& context) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> input, store_->Get(target.tensor_id));
  ASSIGN_OR_RETURN(std::shared_ptr<const CollectivePlan> plan,
                   plans_.Plan({CollectiveKind::kAllGather, target.axes, dim}, LayoutOf(*input)));
  return RunResized(target, std::move(input), *plan, ReduceOp::kSum, context);
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::ReduceScatter(
    const CollectiveTarget& target, std::optional<ReduceOp> op, int64_t scatter_dim,
    const CollectiveContext& context) const {
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> input, store_->Get(target.tensor_id));
  RETURN_IF_ERROR(CheckReducible(*input, CollectiveKind::kReduceScatter));
  ASSIGN_OR_RETURN(
      std::shared_ptr<const CollectivePlan> plan,
      plans_.Plan({CollectiveKind::kReduceScatter, target.axes, scatter_dim}, LayoutOf(*input)));
  const ReduceOp effective = EffectiveOp(op, *input);
  return RunResized(target, std::move(input), *plan, effective, context);
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::RunSameSize(
    const CollectiveTarget& target, std::shared_ptr<const Tensor> input, const CollectivePlan& plan,
    ReduceOp op, const CollectiveContext& context) const {
  if (target.source == SourceHandling::kKeep) {
    ASSIGN_OR_RETURN(std::unique_ptr<Tensor> result,
                     AllocateResult(store_, *input, plan, target.name, /*donated=*/false));
    RETURN_IF_ERROR(SameSizes(*input, *result));
    std::vector<CollectiveItem> items = ItemsFor(plan, input->sharding.mesh(), input->dtype, op,
                                                 SendBuffers(*input), RecvBuffers(*result));
    RETURN_IF_ERROR(engine_->Run(plan.kind, items, context));
    Count(plan.kind, input->device_bytes());
    return Publish(std::move(result), 0, target.commit);
  }
  // In place: our reference must go before the store can hand the tensor
  // over (ids are never reused, so the id still names what was planned).
  const std::string id = input->id;
  input.reset();
  // A call that waited past its deadline or was cancelled in the dispatch
  // queue must not consume the tensor it never touched.
  RETURN_IF_ERROR(context.Check());
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> donated, store_->TakeForDonation(id));
  std::vector<CollectiveItem> items = ItemsFor(plan, donated->sharding.mesh(), donated->dtype, op,
                                               SendBuffers(*donated), RecvBuffers(*donated));
  RETURN_IF_ERROR(engine_->Run(plan.kind, items, context));
  Count(plan.kind, donated->device_bytes());
  RETURN_IF_ERROR(BecomeResult(donated.get(), plan, target.name));
  return Publish(std::move(donated), 0, target.commit);
}

absl::StatusOr<std::shared_ptr<const Tensor>> CollectiveServiceCore::RunResized(
    const CollectiveTarget& target, std::shared_ptr<const Tensor> input, const CollectivePlan& plan,
    ReduceOp op, const CollectiveContext& context) const {
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tensor> result,
      AllocateResult(store_, *input, plan, target.name, target.source == SourceHandling::kDonate));
  DeviceBackend* backend = store_->backend();
  if (plan.contiguous) {
    std::vector<CollectiveItem> items = ItemsFor(plan, input->sharding.mesh(), input->dtype, op,
                                                 SendBuffers(*input), RecvBuffers(*result));
    RETURN_IF_ERROR(engine_->Run(plan.kind, items, context));
  } else if (plan.kind == CollectiveKind::kAllGather) {
    // Gather the blocks contiguously, then unpack them into the result's
    // boxes.
    ASSIGN_OR_RETURN(StagingBuffers staging, AllocateStaging(backend, *result));
    std::vector<CollectiveItem> items = ItemsFor(plan, input->sharding.mesh(), input->dtype, op,
                                                 SendBuffers(*input), staging.pointers());
    RETURN_IF_ERROR(engine_->Run(plan.kind, items, context));
    RETURN_IF_ERROR(UnpackGathered(backend, plan, *input, staging, result.get()));
  } else {
    // Pack every rank's blocks contiguously, then reduce-scatter them.
    ASSIGN_OR_RETURN(StagingBuffers staging, AllocateStaging(backend, *input));
    RETURN_IF_ERROR(PackForScatter(backend, plan, *input, *result, &staging));
    std::vector<CollectiveItem> items = ItemsFor(plan, input->sharding.mesh(), input->dtype, op,
                                                 staging.const_pointers(), RecvBuffers(*result));
    RETURN_IF_ERROR(engine_->Run(plan.kind, items, context));
  }
  Count(plan.kind, input->device_bytes());
  ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> committed,
                   Publish(std::move(result), 0, target.commit));
  if (target.source == SourceHandling::kDonate) {
    // Already deleted by someone else is fine: the input is gone either way.
    store_->Delete({input->id}).IgnoreError();
  }
  return committed;
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> CollectiveServiceCore::AllReduceBatch(
    const std::vector<std::string>& tensor_ids, const std::vector<std::string>& axes,
    std::optional<ReduceOp> op, SourceHandling source, const CollectiveContext& context,
    const CollectiveCommit* commit) const {
  if (tensor_ids.empty()) return absl::InvalidArgumentError("tensor_ids must not be empty");
  if (source == SourceHandling::kDonate) {
    absl::flat_hash_set<std::string> seen;
    for (size_t i = 0; i < tensor_ids.size(); ++i) {
      if (!seen.insert(tensor_ids[i]).second) {
        return absl::InvalidArgumentError(
            absl::StrCat("tensor_ids[", i, "]: tensor '", tensor_ids[i],
                         "' is listed twice; each tensor can be donated once"));
      }
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const Tensor>> inputs, store_->GetMany(tensor_ids));
  const Tensor& first = *inputs[0];
  std::vector<std::shared_ptr<const CollectivePlan>> plans;
  std::vector<ReduceOp> ops;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = *inputs[i];
    if (t.mesh_id != first.mesh_id || !(t.sharding.mesh() == first.sharding.mesh())) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor_ids[", i, "] ('", t.id, "') is on mesh '", t.mesh_id, "' ",
                       t.sharding.mesh().ToString(), " but tensor_ids[0] ('", first.id,
                       "') is on mesh '", first.mesh_id, "' ", first.sharding.mesh().ToString(),
                       "; a batch reduces tensors of one mesh"));
    }
    if (t.dtype != first.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor_ids[", i, "] ('", t.id, "') is ", DTypeName(t.dtype), " but tensor_ids[0] is ",
          DTypeName(first.dtype), "; a batch reduces one dtype"));
    }
    RETURN_IF_ERROR(WithIndex(CheckReducible(t, CollectiveKind::kAllReduce), i));
    absl::StatusOr<std::shared_ptr<const CollectivePlan>> plan =
        plans_.Plan({CollectiveKind::kAllReduce, axes}, LayoutOf(t));
    if (!plan.ok()) return WithIndex(plan.status(), i);
    plans.push_back(*std::move(plan));
    ops.push_back(EffectiveOp(op, t));
  }

  std::vector<std::unique_ptr<Tensor>> results;
  std::vector<CollectiveItem> items;
  if (source == SourceHandling::kKeep) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<Tensor> result,
                       AllocateResult(store_, *inputs[i], *plans[i], "", /*donated=*/false));
      RETURN_IF_ERROR(SameSizes(*inputs[i], *result));
      std::vector<CollectiveItem> more =
          ItemsFor(*plans[i], inputs[i]->sharding.mesh(), inputs[i]->dtype, ops[i],
                   SendBuffers(*inputs[i]), RecvBuffers(*result));
      items.insert(items.end(), more.begin(), more.end());
      results.push_back(std::move(result));
    }
  } else {
    inputs.clear();
    RETURN_IF_ERROR(context.Check());  // never consume inputs a stale call did not touch
    ASSIGN_OR_RETURN(results, store_->TakeAllForDonation(tensor_ids));
    for (size_t i = 0; i < results.size(); ++i) {
      std::vector<CollectiveItem> more =
          ItemsFor(*plans[i], results[i]->sharding.mesh(), results[i]->dtype, ops[i],
                   SendBuffers(*results[i]), RecvBuffers(*results[i]));
      items.insert(items.end(), more.begin(), more.end());
    }
  }
  RETURN_IF_ERROR(engine_->Run(CollectiveKind::kAllReduce, items, context));
  int64_t bytes = 0;
  for (const CollectiveItem& item : items) {
    for (const RankBuffers& rank : item.local) bytes += rank.send ? rank.send->size() : 0;
  }
  Count(CollectiveKind::kAllReduce, bytes);
  std::vector<std::shared_ptr<const Tensor>> committed;
  for (size_t i = 0; i < results.size(); ++i) {
    if (source == SourceHandling::kDonate) {
      RETURN_IF_ERROR(BecomeResult(results[i].get(), *plans[i], ""));
    }
  }
  for (size_t i = 0; i < results.size(); ++i) {
    ASSIGN_OR_RETURN(std::shared_ptr<const Tensor> t, Publish(std::move(results[i]), i, commit));
    committed.push_back(std::move(t));
  }
  return committed;
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> CollectiveServiceCore::Execute(
    const CollectiveRequest& request, const std::string& tenant,
    const CollectiveContext& context) const {
  if (distributed_ != nullptr) return distributed_->Execute(request, tenant, context);
  // One daemon is one controller: kMulti means nothing more here.
  return Run(request, context, nullptr);
}

absl::StatusOr<std::vector<std::vector<int64_t>>> CollectiveServiceCore::DeviceGroups(
    const CollectiveRequest& request) const {
  ASSIGN_OR_RETURN(std::vector<std::shared_ptr<const Tensor>> inputs,
                   store_->GetMany(request.tensor_ids));
  std::vector<std::vector<int64_t>> groups;
  for (const std::shared_ptr<const Tensor>& input : inputs) {
    PlanQuery query;
    query.axes = request.axes;
    switch (request.kind) {
      case CollectiveRequestKind::kAllReduce:
      case CollectiveRequestKind::kAllReduceBatch:
        query.kind = CollectiveKind::kAllReduce;
        break;
      case CollectiveRequestKind::kAllGather:
        query.kind = CollectiveKind::kAllGather;
        query.dim = request.dim;
        break;
      case CollectiveRequestKind::kReduceScatter:
        query.kind = CollectiveKind::kReduceScatter;
        query.dim = request.dim;
        break;
      case CollectiveRequestKind::kBroadcast: {
        const int64_t root = input->sharding.mesh().PositionOf(request.root_device_id);
        if (root < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("broadcast: root device ", request.root_device_id,
                           " is not in the tensor's mesh ", input->sharding.mesh().DebugString()));
        }
        query.kind = CollectiveKind::kBroadcast;
        query.root_position = root;
        break;
      }
    }
    absl::StatusOr<std::shared_ptr<const CollectivePlan>> plan =
        plans_.Plan(std::move(query), LayoutOf(*input));
    if (!plan.ok()) return plan.status();
    const std::vector<int64_t>& devices = input->sharding.mesh().device_ids();
    for (const std::vector<int64_t>& positions : (*plan)->groups) {
      std::vector<int64_t>& group = groups.emplace_back();
      group.reserve(positions.size());
      for (int64_t position : positions) group.push_back(devices[position]);
    }
  }
  return groups;
}

absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> CollectiveServiceCore::Run(
    const CollectiveRequest& request, const CollectiveContext& context,
    const CollectiveCommit* commit) const {
  using Results = std::vector<std::shared_ptr<const Tensor>>;
  auto one = [](absl::StatusOr<std::shared_ptr<const Tensor>> t) -> absl::StatusOr<Results> {
    if (!t.ok()) return t.status();
    return Results{*std::move(t)};
  };
  if (request.kind == CollectiveRequestKind::kAllReduceBatch) {
    return AllReduceBatch(request.tensor_ids, request.axes, request.op, request.source, context,
                          commit);
  }
  if (request.tensor_ids.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(request.KindName(), " takes one tensor_id, got ", request.tensor_ids.size()));
  }
  CollectiveTarget target;
  target.tensor_id = request.tensor_ids.front();
  target.axes = request.axes;
  target.source = request.source;
  target.name = request.name;
  target.commit = commit;
  switch (request.kind) {
    case CollectiveRequestKind::kAllReduce:
      return one(AllReduce(target, request.op, context));
    case CollectiveRequestKind::kAllGather:
      return one(AllGather(target, request.dim, context));
    case CollectiveRequestKind::kReduceScatter:
      return one(ReduceScatter(target, request.op, request.dim, context));
    case CollectiveRequestKind::kBroadcast:
      return one(Broadcast(target, request.root_device_id, context));
    case CollectiveRequestKind::kAllReduceBatch:
      break;
  }
  return absl::InvalidArgumentError("unknown collective kind");
}

}  // namespace placement::server
