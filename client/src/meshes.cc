#include "placement/client/meshes.h"

#include <map>

#include "client/src/client_impl.h"
#include "client/src/convert.h"
#include "common/grpc_status.h"
#include "grpcpp/grpcpp.h"
#include "placement/v1/mesh_service.grpc.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

void ApplyOptions(const CreateMeshOptions& options, pb::CreateMeshRequest* request) {
  request->set_mesh_id(options.mesh_id);
  for (int64_t id : options.device_ids) request->add_device_ids(id);
}

absl::StatusOr<Mesh> CreateFrom(const Client& client, const pb::CreateMeshRequest& request) {
  grpc::ClientContext context;
  client.impl().PrepareContext(&context);
  pb::CreateMeshResponse response;
  auto status =
      pb::MeshService::NewStub(client.impl().channel)->CreateMesh(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return FromProto(response.mesh());
}

}  // namespace

absl::StatusOr<Mesh> MeshClient::Create(const MeshAxes& axes,
                                        const CreateMeshOptions& options) const {
  pb::CreateMeshRequest request;
  ApplyOptions(options, &request);
  auto* spec = request.mutable_axes();
  for (const auto& [name, size] : axes) {
    auto* axis = spec->add_axes();
    axis->set_name(name);
    axis->set_size(size);
  }
  return CreateFrom(client_, request);
}

absl::StatusOr<Mesh> MeshClient::CreateDataParallel(std::optional<int64_t> num_devices,
                                                    const std::string& axis_name,
                                                    const CreateMeshOptions& options) const {
  pb::CreateMeshRequest request;
  ApplyOptions(options, &request);
  auto* preset = request.mutable_data_parallel();
  if (num_devices.has_value()) preset->set_num_devices(*num_devices);
  preset->set_axis_name(axis_name);
  return CreateFrom(client_, request);
}

absl::StatusOr<Mesh> MeshClient::CreateModelParallel(std::optional<int64_t> num_devices,
                                                     const std::string& axis_name,
                                                     const CreateMeshOptions& options) const {
  pb::CreateMeshRequest request;
  ApplyOptions(options, &request);
  auto* preset = request.mutable_model_parallel();
  if (num_devices.has_value()) preset->set_num_devices(*num_devices);
  preset->set_axis_name(axis_name);
  return CreateFrom(client_, request);
}

absl::StatusOr<Mesh> MeshClient::CreateHybrid(int64_t data_parallel_size,
                                              int64_t model_parallel_size,
                                              const std::string& data_axis,
                                              const std::string& model_axis,
                                              const CreateMeshOptions& options) const {
  pb::CreateMeshRequest request;
  ApplyOptions(options, &request);
  auto* preset = request.mutable_hybrid();
  preset->set_data_parallel_size(data_parallel_size);
  preset->set_model_parallel_size(model_parallel_size);
  preset->set_data_axis(data_axis);
  preset->set_model_axis(model_axis);
  return CreateFrom(client_, request);
}

absl::StatusOr<MeshInfo> MeshClient::Get(const std::string& mesh_id) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::GetMeshRequest request;
  request.set_mesh_id(mesh_id);
  pb::GetMeshResponse response;
  auto status =
      pb::MeshService::NewStub(client_.impl().channel)->GetMesh(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  MeshInfo info;
  info.total_devices = response.total_devices();
  // The proto map has no order; the mesh's axes list does.
  info.mesh = FromProto(response.mesh());
  info.axes = info.mesh.axes;
  if (info.axes.empty()) {
    std::map<std::string, int64_t> sorted(response.axes().begin(), response.axes().end());
    for (const auto& [name, size] : sorted) info.axes.push_back({name, size});
  }
  return info;
}

absl::StatusOr<std::vector<Mesh>> MeshClient::List() const {
  std::vector<Mesh> meshes;
  pb::ListMeshesRequest request;
  do {  // every page
    grpc::ClientContext context;
    client_.impl().PrepareContext(&context);
    pb::ListMeshesResponse response;
    auto status =
        pb::MeshService::NewStub(client_.impl().channel)->ListMeshes(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    for (const pb::Mesh& m : response.meshes()) meshes.push_back(FromProto(m));
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return meshes;
}

absl::StatusOr<int64_t> MeshClient::Delete(const std::string& mesh_id,
                                           TensorsOnMesh tensors) const {
  grpc::ClientContext context;
  client_.impl().PrepareContext(&context);
  pb::DeleteMeshRequest request;
  request.set_mesh_id(mesh_id);
  request.set_force(tensors == TensorsOnMesh::kDelete);
  pb::DeleteMeshResponse response;
  auto status =
      pb::MeshService::NewStub(client_.impl().channel)->DeleteMesh(&context, request, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response.deleted_tensors();
}

}  // namespace placement::client
