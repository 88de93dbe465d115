// Tenant-scoped lookups of tensors: what the handlers call before handing ids
// to the core, so that a tensor of another tenant behaves exactly like an id
// that does not exist (NOT_FOUND, same message) on every RPC, and an admin
// caller sees every tenant's tensors.
//
// Ids are checked for length first: an id longer than kMaxTensorIdLength is
// INVALID_ARGUMENT naming the field and the length, without echoing the id.
//
// A tensor's tenant never changes and ids are never reused, so a check here
// stays true for the rest of the call. Thread-safe (the store is).
#ifndef PLACEMENT_SERVER_TENSOR_TENANT_ACCESS_H_
#define PLACEMENT_SERVER_TENSOR_TENANT_ACCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/auth/caller.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// Tensor ids are "t-" and 32 hex digits; anything much longer is not one.
inline constexpr size_t kMaxTensorIdLength = 64;

// The tensor `id` if `caller` sees it. `field` names the request field in
// errors ("tensor_id", "tensor_ids[2]").
absl::StatusOr<std::shared_ptr<const Tensor>> GetVisibleTensor(const TensorStore& store,
                                                               const Caller& caller,
                                                               const std::string& id,
                                                               absl::string_view field);

// OK when `caller` sees every id; otherwise the error for the first that it
// does not (fields "<field>[i]").
absl::Status CheckTensorsVisible(const TensorStore& store, const Caller& caller,
                                 const std::vector<std::string>& ids, absl::string_view field);

// The store's List, narrowed to what `caller` sees.
std::vector<std::shared_ptr<const Tensor>> ListVisibleTensors(const TensorStore& store,
                                                              const Caller& caller,
                                                              const TensorFilter& filter);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENANT_ACCESS_H_
