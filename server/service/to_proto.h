// Core -> wire: the conversions the handlers use to answer, in one place
// (the other direction, with validation, is from_proto.h; those both gRPC
// edges share are in server/convert/ and included here).
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_TO_PROTO_H_
#define PLACEMENT_SERVER_SERVICE_TO_PROTO_H_

#include <cstdint>

#include "common/reduce_op.h"
#include "placement/v1/mesh_service.pb.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/convert/mesh_proto.h"
#include "server/convert/reduce_op_proto.h"
#include "server/device/device_inventory.h"
#include "server/mesh/mesh_registry.h"
#include "server/tensor/tensor.h"

namespace placement::server {

placement::v1::HardwareType HardwareTypeToProto(HardwareType type);

// ListDevices' view of a device, with its live accounting.
void DeviceToProto(const DeviceState& state, placement::v1::Device* out);

// Describe's view of a tensor. `placement` is the placement as requested,
// reconstructed from the sharding: a one-device implicit mesh is device_id,
// P() with no partial axes on a registered mesh is replicated_mesh_id,
// anything else is the sharding itself (mesh_id empty for implicit
// "replica" meshes; the shards list their devices).
void TensorToProto(const Tensor& tensor, placement::v1::TensorInfo* out);
void ShardToProto(const ShardDomain& domain, DType dtype, int32_t process_index,
                  placement::v1::ShardInfo* out);
void ShardingToProto(const Tensor& tensor, placement::v1::Sharding* out);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_TO_PROTO_H_
