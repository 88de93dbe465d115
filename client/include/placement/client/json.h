// JSON text of the client's result types, for logs and tools (placectl
// --json prints these). The text is the proto3 JSON mapping of the daemon's
// wire message for the same data -- field names as in proto/placement/v1
// (snake case), 64-bit integers as strings, enums by name, default values
// included -- so it matches what grpcurl prints for the same call.
//
// Covered: every value a call of Client, MeshClient, TensorClient,
// RegionClient, CollectiveClient and PrefetchStream returns, and their
// parts (ShardInfo, Sharding). Not covered: the facades' trees (TensorTree,
// DownloadedTree: maps of the values above) and the client-side
// PrefetchIteratorStats, which have no wire message.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_CLIENT_JSON_H_
#define PLACEMENT_CLIENT_JSON_H_

#include <string>
#include <vector>

#include "placement/client/meshes.h"
#include "placement/client/prefetch.h"
#include "placement/client/regions.h"
#include "placement/client/tensor_info.h"
#include "placement/client/types.h"

namespace placement::client {

std::string ToJson(const Device& device);
// {"devices": [...]}, as ListDevices answers.
std::string ToJson(const std::vector<Device>& devices);
// With "hardware_type_name" (the seed's string) beside the enum.
std::string ToJson(const DeviceInfo& info);
std::string ToJson(const BatchSizeRecommendation& recommendation);
std::string ToJson(const BatchSizeValidation& validation);
std::string ToJson(const DaemonStatus& status);
std::string ToJson(const Mesh& mesh);
// {"meshes": [...]}, as ListMeshes answers.
std::string ToJson(const std::vector<Mesh>& meshes);
// {"mesh": ..., "total_devices": "n", "axes": {name: size}}, as GetMesh answers.
std::string ToJson(const MeshInfo& info);
std::string ToJson(const TensorInfo& info);
// One shard of a TensorInfo (ShardInfo).
std::string ToJson(const ShardInfo& shard);
// {"tensors": [...]}, as List answers.
std::string ToJson(const std::vector<TensorInfo>& tensors);
std::string ToJson(const DownloadHeader& header);
// {"tensors": [{"key": ..., "tensor": ...}, ...]}, as UploadBatch answers.
std::string ToJson(const std::vector<NamedTensor>& group);
// {"sequence": "k", "tensors": [...]}: a prefetch stream's ready message.
std::string ToJson(const DeviceBatch& batch);
std::string ToJson(const PrefetchStats& stats);
// A resolved sharding (TensorInfo::sharding).
std::string ToJson(const Sharding& sharding);
std::string ToJson(const RegionInfo& region);
// {"regions": [...]}, as ListRegions answers.
std::string ToJson(const std::vector<RegionInfo>& regions);
// {"streams": [...]}, as ListStreams answers.
std::string ToJson(const std::vector<StreamStatus>& streams);
std::string ToJson(const MemoryTrim& trim);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_JSON_H_
