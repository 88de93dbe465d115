#include "server/convert/collective_request_proto.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/convert/reduce_op_proto.h"
#include "server/tensor/label_limits.h"

namespace placement::server {

namespace pb = placement::v1;

namespace {

absl::StatusOr<Controller> ControllerFromProto(int value) {
  switch (value) {
    case pb::CONTROLLER_UNSPECIFIED:
    case pb::CONTROLLER_SINGLE:
      return Controller::kSingle;
    case pb::CONTROLLER_MULTI:
      return Controller::kMulti;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "controller is ", value, "; expected CONTROLLER_SINGLE (1) or CONTROLLER_MULTI (2)"));
  }
}

// The fields every one-tensor request has: tensor_id, axes, source, name.
template <typename Message>
absl::Status TargetFromProto(const Message& message, CollectiveRequest* out) {
  if (message.tensor_id().empty()) return absl::InvalidArgumentError("tensor_id must be set");
  out->tensor_ids = {message.tensor_id()};
  out->axes.assign(message.axes().begin(), message.axes().end());
  ASSIGN_OR_RETURN(out->source, SourceHandlingFromProto(message.source()));
  RETURN_IF_ERROR(CheckLength("name", message.name(), kMaxTensorNameLength));
  out->name = message.name();
  return absl::OkStatus();
}

// The controller, kind and target a one-tensor request starts with.
template <typename Message>
absl::StatusOr<CollectiveRequest> OneTensorRequest(CollectiveRequestKind kind,
                                                   const Message& message) {
  CollectiveRequest out;
  ASSIGN_OR_RETURN(out.controller, ControllerFromProto(message.controller()));
  out.kind = kind;
  RETURN_IF_ERROR(TargetFromProto(message, &out));
  return out;
}

template <typename Message>
void TargetToProto(const CollectiveRequest& request, Message* out) {
  if (!request.tensor_ids.empty()) out->set_tensor_id(request.tensor_ids.front());
  for (const std::string& axis : request.axes) out->add_axes(axis);
  out->set_source(SourceHandlingToProto(request.source));
  out->set_name(request.name);
  out->set_controller(request.controller == Controller::kMulti ? pb::CONTROLLER_MULTI
                                                               : pb::CONTROLLER_SINGLE);
}

}  // namespace

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::AllReduceRequest& r) {
  ASSIGN_OR_RETURN(CollectiveRequest out, OneTensorRequest(CollectiveRequestKind::kAllReduce, r));
  ASSIGN_OR_RETURN(out.op, RequestedReduceOp(r.op(), r.op_name()));
  return out;
}

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::AllReduceBatchRequest& r) {
  CollectiveRequest out;
  ASSIGN_OR_RETURN(out.controller, ControllerFromProto(r.controller()));
  out.kind = CollectiveRequestKind::kAllReduceBatch;
  out.tensor_ids.assign(r.tensor_ids().begin(), r.tensor_ids().end());
  out.axes.assign(r.axes().begin(), r.axes().end());
  ASSIGN_OR_RETURN(out.op, RequestedReduceOp(r.op(), r.op_name()));
  ASSIGN_OR_RETURN(out.source, SourceHandlingFromProto(r.source()));
  return out;
}

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::AllGatherRequest& r) {
  ASSIGN_OR_RETURN(CollectiveRequest out, OneTensorRequest(CollectiveRequestKind::kAllGather, r));
  out.dim = r.dim();
  return out;
}

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::ReduceScatterRequest& r) {
  ASSIGN_OR_RETURN(CollectiveRequest out,
                   OneTensorRequest(CollectiveRequestKind::kReduceScatter, r));
  ASSIGN_OR_RETURN(out.op, RequestedReduceOp(r.op(), r.op_name()));
  out.dim = r.scatter_dim();
  return out;
}

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::BroadcastRequest& r) {
  ASSIGN_OR_RETURN(CollectiveRequest out, OneTensorRequest(CollectiveRequestKind::kBroadcast, r));
  out.root_device_id = r.root_device_id();
  return out;
}

absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const pb::CollectiveOp& op) {
  switch (op.request_case()) {
    case pb::CollectiveOp::kAllReduce:
      return CollectiveRequestFromProto(op.all_reduce());
    case pb::CollectiveOp::kAllReduceBatch:
      return CollectiveRequestFromProto(op.all_reduce_batch());
    case pb::CollectiveOp::kAllGather:
      return CollectiveRequestFromProto(op.all_gather());
    case pb::CollectiveOp::kReduceScatter:
      return CollectiveRequestFromProto(op.reduce_scatter());
    case pb::CollectiveOp::kBroadcast:
      return CollectiveRequestFromProto(op.broadcast());
    case pb::CollectiveOp::REQUEST_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("the collective request is empty");
}

void CollectiveRequestToProto(const CollectiveRequest& request, pb::CollectiveOp* out) {
  const pb::ReduceOp op =
      request.op.has_value() ? ReduceOpToProto(*request.op) : pb::REDUCE_OP_UNSPECIFIED;
  switch (request.kind) {
    case CollectiveRequestKind::kAllReduce:
      TargetToProto(request, out->mutable_all_reduce());
      out->mutable_all_reduce()->set_op(op);
      return;
    case CollectiveRequestKind::kAllReduceBatch: {
      pb::AllReduceBatchRequest* r = out->mutable_all_reduce_batch();
      for (const std::string& id : request.tensor_ids) r->add_tensor_ids(id);
      for (const std::string& axis : request.axes) r->add_axes(axis);
      r->set_op(op);
      r->set_source(SourceHandlingToProto(request.source));
      r->set_controller(request.controller == Controller::kMulti ? pb::CONTROLLER_MULTI
                                                                 : pb::CONTROLLER_SINGLE);
      return;
    }
    case CollectiveRequestKind::kAllGather:
      TargetToProto(request, out->mutable_all_gather());
      out->mutable_all_gather()->set_dim(request.dim);
      return;
    case CollectiveRequestKind::kReduceScatter:
      TargetToProto(request, out->mutable_reduce_scatter());
      out->mutable_reduce_scatter()->set_op(op);
      out->mutable_reduce_scatter()->set_scatter_dim(request.dim);
      return;
    case CollectiveRequestKind::kBroadcast:
      TargetToProto(request, out->mutable_broadcast());
      out->mutable_broadcast()->set_root_device_id(request.root_device_id);
      return;
  }
}

}  // namespace placement::server
