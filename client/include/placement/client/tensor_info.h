// TensorInfo: what the daemon reports about a tensor it holds (Upload,
// Describe, List, Place, the collectives and prefetch all return it), and
// NamedTensor, one entry of a group (UploadBatch, prefetch batches).
//
// Passive values; thread-compatible.
#ifndef PLACEMENT_CLIENT_TENSOR_INFO_H_
#define PLACEMENT_CLIENT_TENSOR_INFO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "placement/client/rules.h"
#include "placement/client/types.h"

namespace placement::client {

struct TensorInfo {
  std::string id;  // opaque, unguessable
  std::string name;
  std::string owner;   // the client's label within the tenant
  std::string tenant;  // the authenticated tenant (empty without authentication)
  DType dtype = DType::kUnspecified;
  std::vector<int64_t> shape;
  Placement placement;  // as requested
  // As resolved: single-device placements use a one-device mesh.
  Sharding sharding;
  // One per mesh device, in row-major mesh order.
  std::vector<ShardInfo> shards;
  int64_t size_bytes = 0;    // logical bytes of the global array
  int64_t device_bytes = 0;  // bytes held on devices, over all shards

  bool operator==(const TensorInfo&) const = default;
};

// One array of a group, under its key ("images", "labels").
struct NamedTensor {
  std::string key;
  TensorInfo tensor;

  bool operator==(const NamedTensor&) const = default;
};

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_TENSOR_INFO_H_
