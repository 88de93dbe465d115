#include "placement/client/collectives.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "common/grpc_status.h"
#include "common/inline_arena.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/collective_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

// The options' own deadline, or the Client's default.
void Prepare(const Client& client, const CollectiveOptions& options, grpc::ClientContext* context) {
  client.impl().Prepare(context, options.timeout > absl::ZeroDuration()
                                     ? options.timeout
                                     : client.options().default_deadline);
}

// One single-tensor collective RPC: the options' deadline, name, axes and
// source handling applied to `request`; the daemon's status kept.
template <typename Request>
absl::StatusOr<TensorInfo> CallOne(
    const Client& client, const CollectiveOptions& options,
    grpc::Status (pb::CollectiveService::Stub::*method)(grpc::ClientContext*, const Request&,
                                                        pb::CollectiveResponse*),
    Request request) {
  grpc::ClientContext context;
  Prepare(client, options, &context);
  request.set_name(options.name);
  ApplyCollectiveOptions(options, &request);
  // The response's shards parse into one arena (common/inline_arena.h).
  InlineArena arena;
  auto* response = arena.Create<pb::CollectiveResponse>();
  pb::CollectiveService::Stub* stub = client.impl().collective_stub.get();
  grpc::Status status = (stub->*method)(&context, request, response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response->tensor());
}

}  // namespace

absl::StatusOr<TensorInfo> CollectiveClient::AllReduce(const std::string& tensor_id, ReduceOp op,
                                                       const CollectiveOptions& options) const {
  return AllReduceImpl(tensor_id, op, "", options);
}

absl::StatusOr<TensorInfo> CollectiveClient::AllReduce(const std::string& tensor_id,
                                                       const std::string& op_name,
                                                       const CollectiveOptions& options) const {
  return AllReduceImpl(tensor_id, ReduceOp::kUnspecified, op_name, options);
}

absl::StatusOr<TensorInfo> CollectiveClient::AllReduceImpl(const std::string& tensor_id,
                                                           ReduceOp op, const std::string& op_name,
                                                           const CollectiveOptions& options) const {
  pb::AllReduceRequest request;
  request.set_tensor_id(tensor_id);
  request.set_op(ToProto(op));
  request.set_op_name(op_name);
  return CallOne(client_, options, &pb::CollectiveService::Stub::AllReduce, std::move(request));
}

absl::StatusOr<std::vector<TensorInfo>> CollectiveClient::AllReduceBatch(
    const std::vector<std::string>& tensor_ids, ReduceOp op,
    const CollectiveOptions& options) const {
  return AllReduceBatchImpl(tensor_ids, op, "", options);
}

absl::StatusOr<std::vector<TensorInfo>> CollectiveClient::AllReduceBatch(
    const std::vector<std::string>& tensor_ids, const std::string& op_name,
    const CollectiveOptions& options) const {
  return AllReduceBatchImpl(tensor_ids, ReduceOp::kUnspecified, op_name, options);
}

absl::StatusOr<std::vector<TensorInfo>> CollectiveClient::AllReduceBatchImpl(
    const std::vector<std::string>& tensor_ids, ReduceOp op, const std::string& op_name,
    const CollectiveOptions& options) const {
  grpc::ClientContext context;
  Prepare(client_, options, &context);
  pb::AllReduceBatchRequest request;
  for (const std::string& id : tensor_ids) request.add_tensor_ids(id);
  request.set_op(ToProto(op));
  request.set_op_name(op_name);
  ApplyCollectiveOptions(options, &request);
  pb::AllReduceBatchResponse response;
  auto status = client_.impl().collective_stub->AllReduceBatch(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  if (response.tensors_size() != request.tensor_ids_size()) {
    return absl::InternalError(absl::StrCat("AllReduceBatch of ", request.tensor_ids_size(),
                                            " tensors returned ", response.tensors_size(),
                                            " results"));
  }
  return FromProtos(response.tensors());
}

absl::StatusOr<TensorInfo> CollectiveClient::AllGather(const std::string& tensor_id, int64_t dim,
                                                       const CollectiveOptions& options) const {
  pb::AllGatherRequest request;
  request.set_tensor_id(tensor_id);
  request.set_dim(dim);
  return CallOne(client_, options, &pb::CollectiveService::Stub::AllGather, std::move(request));
}

absl::StatusOr<TensorInfo> CollectiveClient::ReduceScatter(const std::string& tensor_id,
                                                           ReduceOp op, int64_t scatter_dim,
                                                           const CollectiveOptions& options) const {
  pb::ReduceScatterRequest request;
  request.set_tensor_id(tensor_id);
  request.set_op(ToProto(op));
  request.set_scatter_dim(scatter_dim);
  return CallOne(client_, options, &pb::CollectiveService::Stub::ReduceScatter, std::move(request));
}

absl::StatusOr<TensorInfo> CollectiveClient::Broadcast(const std::string& tensor_id,
                                                       int64_t root_device_id,
                                                       const CollectiveOptions& options) const {
  pb::BroadcastRequest request;
  request.set_tensor_id(tensor_id);
  request.set_root_device_id(root_device_id);
  return CallOne(client_, options, &pb::CollectiveService::Stub::Broadcast, std::move(request));
}

}  // namespace placement::client
