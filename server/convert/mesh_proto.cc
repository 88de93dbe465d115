#include "server/convert/mesh_proto.h"

#include <vector>

namespace placement::server {

namespace pb = placement::v1;

void MeshToProto(const RegisteredMesh& mesh, int64_t tensor_count, pb::Mesh* out) {
  out->set_id(mesh.id);
  for (const MeshAxis& axis : mesh.mesh.axes()) {
    pb::MeshAxis* a = out->add_axes();
    a->set_name(axis.name);
    a->set_size(axis.size);
  }
  for (int64_t id : mesh.mesh.device_ids()) out->add_device_ids(id);
  out->set_total_devices(mesh.mesh.num_devices());
  out->set_tensor_count(tensor_count);
  out->set_session_id(mesh.session_id);
}

absl::StatusOr<Mesh> MeshFromProto(const pb::Mesh& proto) {
  std::vector<MeshAxis> axes;
  for (const pb::MeshAxis& a : proto.axes()) axes.push_back({a.name(), a.size()});
  return Mesh::Create(std::move(axes),
                      std::vector<int64_t>(proto.device_ids().begin(), proto.device_ids().end()));
}

}  // namespace placement::server
