// TensorClient: dtype helpers, selections and the unary calls (Describe,
// List, Delete, Place, Assemble, Disassemble). Streams live in
// tensors_upload.cc and tensors_download.cc.
#include "placement/client/tensors.h"

#include "absl/strings/str_cat.h"
#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "common/dtype.h"
#include "common/grpc_status.h"
#include "common/shape.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/session_service.grpc.pb.h"
#include "placement/v1/tensor_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
int64_t ElementSize(DType dtype) {
  auto d = DTypeFromProtoValue(static_cast<int>(dtype));
  return d.ok() ? DTypeSize(*d) : 0;
}

absl::StatusOr<int64_t> ExpectedBytes(DType dtype, absl::Span<const int64_t> shape) {
  auto d = DTypeFromProtoValue(static_cast<int>(dtype));
  if (!d.ok()) return d.status();
  absl::Status valid = ValidateShape(shape, *d);
  if (!valid.ok()) return valid;
  return ByteSize(*d, shape);
}

std::string DescribeArray(DType dtype, absl::Span<const int64_t> shape) {
  auto d = DTypeFromProtoValue(static_cast<int>(dtype));
  if (!d.ok()) return "?" + ShapeToString(shape);
  return TypedShapeToString(*d, shape);
}

DownloadSelection DownloadSelection::Device(int64_t device_id) {
  DownloadSelection s;
  s.kind_ = Kind::kDevice;
  s.device_id_ = device_id;
  return s;
}

DownloadSelection DownloadSelection::Devices(std::vector<int64_t> device_ids) {
  DownloadSelection s;
  s.kind_ = Kind::kDevices;
  s.device_ids_ = std::move(device_ids);
  return s;
}

DownloadSelection DownloadSelection::Process(int32_t process_index) {
  DownloadSelection s;
  s.kind_ = Kind::kProcess;
  s.process_index_ = process_index;
  return s;
}

absl::StatusOr<TensorInfo> TensorClient::Describe(const std::string& tensor_id) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::DescribeRequest request;
  request.set_tensor_id(tensor_id);
  pb::DescribeResponse response;
  auto status = client_.impl().tensor_stub->Describe(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response.tensor());
}

absl::StatusOr<std::vector<TensorInfo>> TensorClient::List(const std::string& name_prefix,
                                                           const std::string& mesh_id) const {
  std::vector<TensorInfo> out;
  pb::ListTensorsRequest request;
  request.set_name_prefix(name_prefix);
  request.set_mesh_id(mesh_id);
  do {  // every page
    grpc::ClientContext context;
    client_.impl().PrepareContext(&context);
    pb::ListTensorsResponse response;
    auto status = client_.impl().tensor_stub->List(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (TensorInfo& tensor : FromProtos(response.tensors())) out.push_back(std::move(tensor));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return out;
}

absl::StatusOr<int64_t> TensorClient::Delete(const std::vector<std::string>& tensor_ids) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::DeleteTensorsRequest request;
  for (const auto& id : tensor_ids) request.add_tensor_ids(id);
  pb::DeleteTensorsResponse response;
  auto status = client_.impl().tensor_stub->Delete(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.freed_bytes();
}

absl::Status TensorClient::Persist(const std::vector<std::string>& tensor_ids) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::PersistTensorsRequest request;
  for (const auto& id : tensor_ids) request.add_tensor_ids(id);
  pb::PersistTensorsResponse response;
  return FromGrpcStatus(pb::SessionService::NewStub(client_.impl().channel)
                            ->PersistTensors(&context, request, &response));
}

absl::StatusOr<std::vector<TensorInfo>> TensorClient::Place(
    const std::vector<std::string>& tensor_ids, const Rule& rule, SourceHandling source,
    const std::string& name) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::PlaceRequest request;
  for (const auto& id : tensor_ids) request.add_tensor_ids(id);
  *request.mutable_rule() = ToProto(rule);
  request.set_source(ToProto(source));
  request.set_name(name);
  pb::PlaceResponse response;
  auto status = client_.impl().tensor_stub->Place(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  if (response.tensors_size() != static_cast<int>(tensor_ids.size())) {
    return absl::InternalError(absl::StrCat("Place of ", tensor_ids.size(), " tensors returned ",
                                            response.tensors_size(), " results"));
  }
  return FromProtos(response.tensors());
}

absl::StatusOr<TensorInfo> TensorClient::Place(const std::string& tensor_id, const Rule& rule,
                                               SourceHandling source,
                                               const std::string& name) const {
  auto placed = Place(std::vector<std::string>{tensor_id}, rule, source, name);
  if (!placed.ok()) return placed.status();
  return std::move(placed->front());
}

absl::StatusOr<TensorInfo> TensorClient::Assemble(const std::vector<int64_t>& shape,
                                                  const Placement& placement,
                                                  const std::vector<std::string>& tensor_ids,
                                                  SourceHandling source,
                                                  const std::string& name) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::AssembleRequest request;
  for (int64_t d : shape) request.add_shape(d);
  *request.mutable_placement() = ToProto(placement);
  for (const auto& id : tensor_ids) request.add_tensor_ids(id);
  request.set_source(ToProto(source));
  request.set_name(name);
  pb::AssembleResponse response;
  auto status = client_.impl().tensor_stub->Assemble(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response.tensor());
}

absl::StatusOr<std::vector<TensorInfo>> TensorClient::Disassemble(const std::string& tensor_id,
                                                                  SourceHandling source) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::DisassembleRequest request;
  request.set_tensor_id(tensor_id);
  request.set_source(ToProto(source));
  pb::DisassembleResponse response;
  auto status = client_.impl().tensor_stub->Disassemble(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProtos(response.tensors());
}

}  // namespace placement::client
