// Conversions between the client's value types (placement/client/*.h) and
// the wire messages of proto/placement/v1. The only place that knows both;
// not installed.
//
// The result types convert back too (ToProto), for the JSON text of json.h.
//
// FromProto never fails: an enum value this library does not know becomes
// the enum's unknown / unspecified entry, and fields it does not know are
// dropped. ToProto writes every field the value carries.
#ifndef PLACEMENT_CLIENT_SRC_CONVERT_H_
#define PLACEMENT_CLIENT_SRC_CONVERT_H_

#include <vector>

#include "placement/client/collectives.h"
#include "placement/client/regions.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_info.h"
#include "placement/client/tensors.h"
#include "placement/client/types.h"
#include "placement/v1/collective_service.pb.h"
#include "placement/v1/daemon_service.pb.h"
#include "placement/v1/device_service.pb.h"
#include "placement/v1/prefetch_service.pb.h"
#include "placement/v1/region_service.pb.h"
#include "placement/v1/tensor_service.pb.h"
#include "placement/v1/types.pb.h"

namespace placement::client {

placement::v1::DType ToProto(DType dtype);
DType FromProto(placement::v1::DType dtype);
placement::v1::HardwareType ToProto(HardwareType type);
HardwareType FromProto(placement::v1::HardwareType type);
placement::v1::ReduceOp ToProto(ReduceOp op);
ReduceOp FromProto(placement::v1::ReduceOp op);
placement::v1::SourceHandling ToProto(SourceHandling source);
placement::v1::DataPartition ToProto(DataPartition partition);
placement::v1::Controller ToProto(Controller controller);

placement::v1::Sharding ToProto(const Sharding& sharding);
Sharding FromProto(const placement::v1::Sharding& sharding);
placement::v1::Placement ToProto(const Placement& placement);
Placement FromProto(const placement::v1::Placement& placement);
placement::v1::PlacementRule ToProto(const Rule& rule);

// ProcessLocal as sent: the timeout only when positive (else the daemon's
// default). REQUIRES: ValidateProcessLocal(local) is OK.
placement::v1::ProcessLocal ToProto(const ProcessLocal& local);
// INVALID_ARGUMENT, naming the field, for an empty or over-long
// global_name, a negative global_shape dimension or timeout.
absl::Status ValidateProcessLocal(const ProcessLocal& local);

// ValidateProcessLocal of options.process_local, and INVALID_ARGUMENT when
// options.name is set with it (a process-local upload is named by its
// global_name).
absl::Status ValidateUploadOptions(const UploadOptions& options);

// The header of an Upload stream: dtype, shape, name, owner, rule and
// options.process_local. The errors of ValidateUploadOptions.
absl::Status FillUploadHeader(DType dtype, absl::Span<const int64_t> shape, const Rule& rule,
                              const UploadOptions& options, placement::v1::UploadHeader* header);
// The group-wide fields of an UploadBatch header (rule, name, owner,
// process_local; the arrays are the caller's). Same errors.
absl::Status FillBatchHeader(const Rule& rule, const UploadOptions& options,
                             placement::v1::BatchHeader* header);

// The fields every collective request shares: axes, source handling and
// controller (the single-tensor requests' name is the caller's).
template <typename Request>
void ApplyCollectiveOptions(const CollectiveOptions& options, Request* request) {
  for (const std::string& axis : options.axes) request->add_axes(axis);
  request->set_source(ToProto(options.source));
  request->set_controller(ToProto(options.controller));
}

Device FromProto(const placement::v1::Device& device);
DeviceInfo FromProto(const placement::v1::GetDeviceInfoResponse& info);
BatchSizeRecommendation FromProto(const placement::v1::BatchSizeRecommendation& recommendation);
BatchSizeValidation FromProto(const placement::v1::ValidateBatchSizeResponse& validation);
DaemonStatus FromProto(const placement::v1::GetStatusResponse& status);

Mesh FromProto(const placement::v1::Mesh& mesh);
ShardInfo FromProto(const placement::v1::ShardInfo& shard);
TensorInfo FromProto(const placement::v1::TensorInfo& info);
NamedTensor FromProto(const placement::v1::NamedTensor& named);
DownloadHeader FromProto(const placement::v1::DownloadHeader& header);
PrefetchStats FromProto(const placement::v1::PrefetchStats& stats);
StreamStatus FromProto(const placement::v1::StreamStatus& stream);
MemoryTrim FromProto(const placement::v1::TrimMemoryResponse& trim);
RegionInfo FromProto(const placement::v1::RegionInfo& region);

placement::v1::Device ToProto(const Device& device);
placement::v1::GetDeviceInfoResponse ToProto(const DeviceInfo& info);
placement::v1::BatchSizeRecommendation ToProto(const BatchSizeRecommendation& recommendation);
placement::v1::ValidateBatchSizeResponse ToProto(const BatchSizeValidation& validation);
placement::v1::GetStatusResponse ToProto(const DaemonStatus& status);
placement::v1::Mesh ToProto(const Mesh& mesh);
placement::v1::ShardInfo ToProto(const ShardInfo& shard);
placement::v1::TensorInfo ToProto(const TensorInfo& info);
placement::v1::DownloadHeader ToProto(const DownloadHeader& header);
placement::v1::NamedTensor ToProto(const NamedTensor& named);
placement::v1::PrefetchStats ToProto(const PrefetchStats& stats);
placement::v1::StreamStatus ToProto(const StreamStatus& stream);
placement::v1::TrimMemoryResponse ToProto(const MemoryTrim& trim);
placement::v1::RegionInfo ToProto(const RegionInfo& region);

// FromProto of every element, in order.
template <typename Message>
auto FromProtos(const google::protobuf::RepeatedPtrField<Message>& messages) {
  std::vector<decltype(FromProto(messages.Get(0)))> out;
  out.reserve(messages.size());
  for (const Message& m : messages) out.push_back(FromProto(m));
  return out;
}

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_CONVERT_H_
