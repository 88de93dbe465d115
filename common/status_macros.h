// Status propagation helpers used across the tree.
//
// RETURN_IF_ERROR(expr): returns the absl::Status of `expr` when it is not OK.
// ASSIGN_OR_RETURN(lhs, expr): evaluates an absl::StatusOr<T>, returns its
// status on error, otherwise moves the value into `lhs` (which may be a
// declaration, e.g. `auto x`).
#ifndef PLACEMENT_COMMON_STATUS_MACROS_H_
#define PLACEMENT_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define PLACEMENT_CONCAT_INNER_(a, b) a##b
#define PLACEMENT_CONCAT_(a, b) PLACEMENT_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                 \
  do {                                        \
    ::absl::Status _status = (expr);          \
    if (!_status.ok()) return _status;        \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr) \
  PLACEMENT_ASSIGN_OR_RETURN_IMPL_(PLACEMENT_CONCAT_(_statusor_, __LINE__), lhs, expr)

#define PLACEMENT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                     \
  if (!statusor.ok()) return std::move(statusor).status();    \
  lhs = std::move(statusor).value()

#endif  // PLACEMENT_COMMON_STATUS_MACROS_H_
