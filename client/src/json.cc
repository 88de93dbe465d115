// ToJson: the value converted back to its wire message, printed with
// protobuf's JSON mapping (see json.h for the promised format).
#include "placement/client/json.h"

#include "client/src/convert.h"
#include "google/protobuf/util/json_util.h"
#include "placement/v1/daemon_service.pb.h"
#include "placement/v1/mesh_service.pb.h"
#include "placement/v1/prefetch_service.pb.h"
#include "placement/v1/region_service.pb.h"
#include "placement/v1/tensor_service.pb.h"

namespace placement::client {
namespace pb = placement::v1;
namespace {

std::string Print(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options).ok()) return "{}";
  return out;
}

}  // namespace

std::string ToJson(const Device& device) { return Print(ToProto(device)); }

std::string ToJson(const std::vector<Device>& devices) {
  pb::ListDevicesResponse response;
  for (const Device& d : devices) *response.add_devices() = ToProto(d);
  return Print(response);
}

std::string ToJson(const DeviceInfo& info) { return Print(ToProto(info)); }
std::string ToJson(const BatchSizeRecommendation& recommendation) {
  return Print(ToProto(recommendation));
}
std::string ToJson(const BatchSizeValidation& validation) { return Print(ToProto(validation)); }
std::string ToJson(const DaemonStatus& status) { return Print(ToProto(status)); }
std::string ToJson(const Mesh& mesh) { return Print(ToProto(mesh)); }

std::string ToJson(const std::vector<Mesh>& meshes) {
  pb::ListMeshesResponse response;
  for (const Mesh& m : meshes) *response.add_meshes() = ToProto(m);
  return Print(response);
}

std::string ToJson(const MeshInfo& info) {
  pb::GetMeshResponse response;
  *response.mutable_mesh() = ToProto(info.mesh);
  response.set_total_devices(info.total_devices);
  for (const MeshAxis& a : info.axes) (*response.mutable_axes())[a.name] = a.size;
  return Print(response);
}

std::string ToJson(const TensorInfo& info) { return Print(ToProto(info)); }
std::string ToJson(const ShardInfo& shard) { return Print(ToProto(shard)); }

std::string ToJson(const std::vector<TensorInfo>& tensors) {
  pb::ListTensorsResponse response;
  for (const TensorInfo& t : tensors) *response.add_tensors() = ToProto(t);
  return Print(response);
}

std::string ToJson(const DownloadHeader& header) { return Print(ToProto(header)); }

std::string ToJson(const std::vector<NamedTensor>& group) {
  pb::UploadBatchResponse response;
  for (const NamedTensor& t : group) *response.add_tensors() = ToProto(t);
  return Print(response);
}

std::string ToJson(const DeviceBatch& batch) {
  pb::PrefetchReady ready;
  ready.set_sequence(batch.sequence);
  for (const NamedTensor& t : batch.tensors) *ready.add_tensors() = ToProto(t);
  return Print(ready);
}

std::string ToJson(const PrefetchStats& stats) { return Print(ToProto(stats)); }
std::string ToJson(const Sharding& sharding) { return Print(ToProto(sharding)); }
std::string ToJson(const RegionInfo& region) { return Print(ToProto(region)); }

std::string ToJson(const std::vector<RegionInfo>& regions) {
  pb::ListRegionsResponse response;
  for (const RegionInfo& r : regions) *response.add_regions() = ToProto(r);
  return Print(response);
}

std::string ToJson(const MemoryTrim& trim) { return Print(ToProto(trim)); }

std::string ToJson(const std::vector<StreamStatus>& streams) {
  pb::ListStreamsResponse response;
  for (const StreamStatus& s : streams) *response.add_streams() = ToProto(s);
  return Print(response);
}

}  // namespace placement::client
