#include "server/peer/tensor_record_proto.h"

#include "common/status_macros.h"
#include "server/convert/reduce_op_proto.h"

namespace placement::server {

namespace pb = placement::v1;

void RecordToProto(const Tensor& t, pb::TensorRecord* out) {
  out->set_id(t.id);
  out->set_name(t.name);
  out->set_owner(t.owner.label);
  out->set_tenant(t.owner.tenant);
  out->set_dtype(static_cast<pb::DType>(static_cast<int>(t.dtype)));
  for (int64_t d : t.shape) out->add_shape(d);
  const Mesh& mesh = t.sharding.mesh();
  for (const MeshAxis& axis : mesh.axes()) {
    pb::MeshAxis* a = out->mutable_mesh()->add_axes();
    a->set_name(axis.name);
    a->set_size(axis.size);
  }
  for (int64_t id : mesh.device_ids()) out->mutable_mesh()->add_device_ids(id);
  out->set_mesh_id(t.mesh_id);
  for (const std::vector<std::string>& axes : t.sharding.spec().dims) {
    pb::DimSharding* dim = out->mutable_spec()->add_dims();
    for (const std::string& axis : axes) dim->add_axes(axis);
  }
  for (const std::string& axis : t.sharding.partial_axes()) out->add_partial_axes(axis);
  if (t.partial_op.has_value()) out->set_partial_op(ReduceOpToProto(*t.partial_op));
  out->set_mode(t.sharding.mode() == ShardingMode::kPadded ? pb::SHARDING_MODE_PADDED
                                                           : pb::SHARDING_MODE_EVEN);
  out->set_session_id(t.session_id);
}

absl::StatusOr<std::unique_ptr<Tensor>> ShellFromRecord(
    const pb::TensorRecord& record, const std::function<int32_t(int64_t)>& process_of) {
  auto t = std::make_unique<Tensor>();
  t->id = record.id();
  t->name = record.name();
  t->owner = TensorOwner(record.tenant(), record.owner());
  if (!pb::DType_IsValid(record.dtype()) || record.dtype() == pb::DTYPE_UNSPECIFIED) {
    return absl::InvalidArgumentError("record.dtype is not a DType");
  }
  t->dtype = static_cast<DType>(static_cast<int>(record.dtype()));
  t->shape.assign(record.shape().begin(), record.shape().end());
  std::vector<MeshAxis> axes;
  for (const pb::MeshAxis& a : record.mesh().axes()) axes.push_back({a.name(), a.size()});
  std::vector<int64_t> ids(record.mesh().device_ids().begin(), record.mesh().device_ids().end());
  Mesh mesh = Mesh::SingleDevice(ids.empty() ? 0 : ids.front());
  if (!axes.empty() || ids.size() != 1) {
    ASSIGN_OR_RETURN(mesh, Mesh::Create(std::move(axes), std::move(ids)));
  }
  PartitionSpec spec;
  for (const pb::DimSharding& dim : record.spec().dims()) {
    spec.dims.emplace_back(dim.axes().begin(), dim.axes().end());
  }
  std::vector<std::string> partial(record.partial_axes().begin(), record.partial_axes().end());
  const ShardingMode mode =
      record.mode() == pb::SHARDING_MODE_PADDED ? ShardingMode::kPadded : ShardingMode::kEven;
  ASSIGN_OR_RETURN(t->sharding, NamedSharding::Create(std::move(mesh), std::move(spec),
                                                      std::move(partial), mode));
  t->mesh_id = record.mesh_id();
  if (record.partial_op() != pb::REDUCE_OP_UNSPECIFIED) {
    ASSIGN_OR_RETURN(ReduceOp op, ReduceOpFromProtoValue(record.partial_op()));
    t->partial_op = op;
  }
  t->session_id = record.session_id();
  ASSIGN_OR_RETURN(std::vector<ShardDomain> domains, t->sharding.IndexDomains(t->shape));
  for (ShardDomain& domain : domains) {
    const int32_t process = process_of(domain.device_id);
    t->shards.push_back(Shard{std::move(domain), nullptr, process});
  }
  return t;
}

}  // namespace placement::server
