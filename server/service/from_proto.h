// Wire -> core: every conversion of a request's messages into the core's
// types, with validation, in one place (the handlers call these and the
// core never sees a generated type; the other direction is to_proto.h).
// Errors are INVALID_ARGUMENT naming the field and the value
// ("sharding.mode is 7; expected SHARDING_MODE_EVEN (1) or
// SHARDING_MODE_PADDED (2)").
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_SERVICE_FROM_PROTO_H_
#define PLACEMENT_SERVER_SERVICE_FROM_PROTO_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/reduce_op.h"
#include "google/protobuf/repeated_field.h"
#include "placement/v1/mesh_service.pb.h"
#include "placement/v1/prefetch_service.pb.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/convert/collective_request_proto.h"
#include "server/convert/reduce_op_proto.h"
#include "server/mesh/mesh_presets.h"
#include "server/prefetch/prefetch_pipeline.h"
#include "server/tensor/download_plan.h"
#include "server/tensor/placement_rule.h"
#include "server/tensor/remote_shards.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

// Default and largest Download chunk.
inline constexpr int64_t kDefaultChunkBytes = int64_t{1} << 20;
inline constexpr int64_t kMaxChunkBytes = int64_t{4} << 20;
// Batches one prefetch stream may keep staged (PrefetchOpen.buffer_size).
inline constexpr int32_t kMaxPrefetchBufferSize = 1024;

// Reductions, source handling and collective requests convert in
// server/convert/ (shared with the daemon-to-daemon edge, server/peer/).

// --- Meshes --------------------------------------------------------------------

// The data-/model-parallel presets (`kind`) and the hybrid preset; sizes
// left unset stay unset (the registry picks its defaults and checks them).
MeshPreset OneAxisPresetFromProto(MeshPresetKind kind, const placement::v1::OneAxisPreset& proto);
MeshPreset HybridPresetFromProto(const placement::v1::HybridPreset& proto);

// --- Placement -----------------------------------------------------------------

// INVALID_ARGUMENT for a mode outside the enum, and (with partial axes) a
// partial_op outside the enum (unset = SUM). Meshes and axes are checked
// when the rule is resolved (PlacementResolver).
absl::StatusOr<ShardingRequest> ShardingFromProto(const placement::v1::Sharding& sharding);
absl::StatusOr<TensorPlacement> PlacementFromProto(const placement::v1::Placement& placement);
// Also INVALID_ARGUMENT for a data_partition.partition outside the enum.
absl::StatusOr<PlacementRule> PlacementRuleFromProto(const placement::v1::PlacementRule& rule);

// --- Tensors -------------------------------------------------------------------

// Dtype enum value and shape from a request. INVALID_ARGUMENT naming
// `field` ("header.dtype", "arrays[1].shape") for an unset dtype, negative
// dimensions, too many dimensions or an int64 byte-size overflow.
absl::StatusOr<TensorSpec> TensorSpecFromProto(
    int dtype, const google::protobuf::RepeatedField<int64_t>& shape, std::string name,
    std::string owner, absl::string_view field);

absl::StatusOr<Shape> ShapeFromProto(const google::protobuf::RepeatedField<int64_t>& shape,
                                     absl::string_view field);

DownloadSelection DownloadSelectionFromProto(const placement::v1::DownloadRequest& request);

// 0 = kDefaultChunkBytes; INVALID_ARGUMENT outside [0, kMaxChunkBytes].
absl::StatusOr<int64_t> ChunkSizeFromProto(int64_t chunk_size_bytes);

// header.process_local: global_name 1..256 bytes (INVALID_ARGUMENT naming
// the field), timeout default 60 s, at most 1 h.
absl::StatusOr<ProcessLocalRequest> ProcessLocalFromProto(const placement::v1::ProcessLocal& proto,
                                                          const std::string& tenant);

// --- Prefetch ------------------------------------------------------------------

// buffer_size 0 -> 2; INVALID_ARGUMENT for a name longer than
// kMaxTensorNameLength, a buffer_size out of range ("open.buffer_size is
// -1; must be in [1, 1024] (0 selects the default 2)") and a malformed rule
// ("open.rule: ...").
absl::StatusOr<PrefetchConfig> PrefetchConfigFromProto(const placement::v1::PrefetchOpen& open);

// Never fails itself: a name or owner too long ("batch.owner is 300 bytes
// ..."), a malformed array ("array 'labels': arrays[1].dtype: ...") or rule
// is carried in PrefetchBatchHeader::arrays for the pipeline to report
// after its stream-state checks.
PrefetchBatchHeader BatchHeaderFromProto(const placement::v1::BatchHeader& header);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_FROM_PROTO_H_
