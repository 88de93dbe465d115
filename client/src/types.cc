// Names of the client's enums. DType, HardwareType and ReduceOp delegate to
// common/ (the one table of each), whose enums carry the same wire values;
// tests/client/types_test.cc checks that every value agrees.
#include "placement/client/types.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_state.h"
#include "common/dtype.h"
#include "common/hardware.h"
#include "common/reduce_op.h"

namespace placement::client {

absl::string_view DTypeName(DType dtype) {
  auto d = DTypeFromProtoValue(static_cast<int>(dtype));
  if (!d.ok()) return "unspecified";
  return placement::DTypeName(*d);
}

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  absl::StatusOr<placement::DType> d = placement::ParseDType(name);
  if (!d.ok()) return d.status();
  return static_cast<DType>(static_cast<int>(*d));
}

absl::string_view HardwareTypeName(HardwareType type) {
  auto t = HardwareTypeFromProtoValue(static_cast<int>(type));
  if (!t.ok()) return "unknown";
  return placement::HardwareTypeName(*t);
}

absl::StatusOr<HardwareType> ParseHardwareType(absl::string_view name) {
  absl::StatusOr<placement::HardwareType> t = placement::ParseHardwareType(name);
  if (!t.ok()) return t.status();
  return static_cast<HardwareType>(static_cast<int>(*t));
}

absl::string_view ReduceOpName(ReduceOp op) {
  auto o = ReduceOpFromProtoValue(static_cast<int>(op));
  if (!o.ok()) return "unspecified";
  return placement::ReduceOpName(*o);
}

absl::StatusOr<ReduceOp> ParseReduceOp(absl::string_view name) {
  absl::StatusOr<placement::ReduceOp> op = placement::ParseReduceOp(name);
  if (!op.ok()) return op.status();
  return static_cast<ReduceOp>(static_cast<int>(*op));
}

absl::string_view StreamKindName(StreamKind kind) {
  switch (kind) {
    case StreamKind::kUpload:
      return "upload";
    case StreamKind::kUploadBatch:
      return "upload_batch";
    case StreamKind::kDownload:
      return "download";
    case StreamKind::kPrefetch:
      return "prefetch";
    case StreamKind::kUnspecified:
      break;
  }
  return "unspecified";
}

absl::string_view DataPartitionName(DataPartition partition) {
  return partition == DataPartition::kReplicated ? "replicated" : "full";
}

absl::string_view ControllerName(Controller controller) {
  return controller == Controller::kMulti ? "multi" : "single";
}

absl::StatusOr<Controller> ParseController(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Controller c : {Controller::kSingle, Controller::kMulti}) {
    if (lower == ControllerName(c)) return c;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown controller '", name, "'; accepted values: single, multi"));
}

}  // namespace placement::client

namespace placement::client {

std::string ClusterStateName(ClusterState state) {
  return std::string(placement::ClusterStateName(static_cast<placement::ClusterState>(state)));
}

std::string ProcessStateName(ProcessState state) {
  return std::string(placement::ProcessStateName(static_cast<placement::ProcessState>(state)));
}

}  // namespace placement::client
