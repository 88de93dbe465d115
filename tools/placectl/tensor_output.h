// How placectl prints tensors: one table row per TensorInfo (id, name, array,
// placement, shards, bytes), or the proto JSON with --json (client::ToJson).
#ifndef PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_
#define PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_

#include <string>
#include <vector>

#include "placement/client/tensor_info.h"

namespace placement::placectl {

// "[4,3]".
std::string ShapeText(const std::vector<int64_t>& shape);
// "grid P('data', None)", "device 3", "replicated on grid".
std::string PlacementText(const client::TensorInfo& info);
// "[4:8, 3:6]".
std::string IndexText(const client::ShardInfo& shard);

// Columns ID NAME ARRAY PLACEMENT SHARDS BYTES DEVICE BYTES; `keys`, when
// not empty, adds a leading KEY column (one entry per tensor).
void PrintTensorTable(const std::vector<client::TensorInfo>& tensors,
                      const std::vector<std::string>& keys = {});
// With json: {"tensors":[...]} (or the single TensorInfo when `single`).
void PrintTensors(const std::vector<client::TensorInfo>& tensors, bool json, bool single = false);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_
