// How placectl prints tensors: one table row per TensorInfo (id, name, array,
// placement, shards, bytes), or the proto JSON with --json.
#ifndef PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_
#define PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_

#include <string>
#include <vector>

#include "absl/types/span.h"
#include "google/protobuf/repeated_field.h"
#include "placement/v1/types.pb.h"

namespace placement::placectl {

absl::Span<const int64_t> Dims(const google::protobuf::RepeatedField<int64_t>& dims);
// "[4,3]".
std::string ShapeText(const google::protobuf::RepeatedField<int64_t>& shape);
// "grid P('data', None)", "device 3", "replicated on grid".
std::string PlacementText(const placement::v1::TensorInfo& info);
// "[4:8, 3:6]".
std::string IndexText(const placement::v1::ShardInfo& shard);

// Columns ID NAME ARRAY PLACEMENT SHARDS BYTES DEVICE BYTES; `keys`, when
// not empty, adds a leading KEY column (one entry per tensor).
void PrintTensorTable(const std::vector<placement::v1::TensorInfo>& tensors,
                      const std::vector<std::string>& keys = {});
// With json: {"tensors":[...]} (or the single TensorInfo when `single`).
void PrintTensors(const std::vector<placement::v1::TensorInfo>& tensors, bool json,
                  bool single = false);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_TENSOR_OUTPUT_H_
