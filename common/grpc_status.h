// Conversion between absl::Status (used everywhere inside) and grpc::Status
// (used only at the RPC edge, on both sides). Codes map one to one; the
// message is kept verbatim.
#ifndef PLACEMENT_COMMON_GRPC_STATUS_H_
#define PLACEMENT_COMMON_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace placement {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline absl::Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

}  // namespace placement

#endif  // PLACEMENT_COMMON_GRPC_STATUS_H_
