// Conversion between the tensor service's protos and the core's types:
// TensorInfo / ShardInfo / Sharding out, TensorSpec / DownloadSelection /
// SourceHandling / chunk sizes in (with validation naming the field).
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_PROTO_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_PROTO_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/repeated_field.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/tensor/download_plan.h"
#include "server/tensor/tensor.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

// Default and largest Download chunk.
inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxChunkBytes = int64_t{4} << 20;

// Describe's view of a tensor. `placement` is the placement as requested,
// reconstructed from the sharding: a one-device implicit mesh is device_id,
// P() with no partial axes on a registered mesh is replicated_mesh_id,
// anything else is the sharding itself (mesh_id empty for implicit
// "replica" meshes; the shards list their devices).
void TensorToProto(const Tensor& tensor, placement::v1::TensorInfo* out);
void ShardToProto(const ShardDomain& domain, DType dtype, placement::v1::ShardInfo* out);
void ShardingToProto(const Tensor& tensor, placement::v1::Sharding* out);

// Dtype enum value and shape from a request. INVALID_ARGUMENT naming
// `field` ("header.dtype", "arrays[1].shape") for an unset dtype, negative
// dimensions, too many dimensions or an int64 byte-size overflow.
absl::StatusOr<TensorSpec> TensorSpecFromProto(
    int dtype, const google::protobuf::RepeatedField<int64_t>& shape, std::string name,
    std::string owner, absl::string_view field);

absl::StatusOr<Shape> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& shape,
                                     absl::string_view field);

// UNSPECIFIED = KEEP. INVALID_ARGUMENT for values outside the enum.
absl::StatusOr<SourceHandling> SourceHandlingFromProto(int value);

DownloadSelection DownloadSelectionFromProto(const placement::v1::DownloadRequest& request);

// 0 = kDefaultChunkBytes; INVALID_ARGUMENT outside [0, kMaxChunkBytes].
absl::StatusOr<int64_t> ChunkSizeFromProto(int64_t chunk_size_bytes);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_PROTO_H_
