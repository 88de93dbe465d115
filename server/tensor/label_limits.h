// Bounds on the client-chosen strings the daemon keeps (tensor names, owner
// labels, mesh ids): a request over a bound is INVALID_ARGUMENT naming the
// field and both lengths, and never echoes the value (a 1 MiB name must not
// come back in the error's metadata).
#ifndef PLACEMENT_SERVER_TENSOR_LABEL_LIMITS_H_
#define PLACEMENT_SERVER_TENSOR_LABEL_LIMITS_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace placement::server {

inline constexpr size_t kMaxTensorNameLength = 256;
inline constexpr size_t kMaxOwnerLength = 128;
inline constexpr size_t kMaxMeshIdLength = 64;  // as MeshRegistry validates

// "header.name is 1048576 bytes long; at most 256".
inline absl::Status CheckLength(absl::string_view field, absl::string_view value, size_t max) {
  if (value.size() <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(field, " is ", value.size(), " bytes long; at most ", max));
}

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_LABEL_LIMITS_H_
