// Tenant-scoped lookups of tensors: what the handlers call before handing ids
// to the core, so that a tensor of another tenant behaves exactly like an id
// that does not exist (NOT_FOUND, same message) on every RPC, and an admin
// caller sees every tenant's tensors.
//
// Wherever a request names a tensor, it may give its id or its name
// (docs/api/tensors.md "Names"): an id the caller sees wins; otherwise the
// text is a name, which resolves when exactly one tensor the caller sees
// (its tenant's; an admin's: every tenant's) carries it. A name that several
// of them carry is FAILED_PRECONDITION listing their ids (at most
// kMaxNameCandidates), and nothing is done. The handlers pass the resolved
// ids on, so the core only ever sees ids.
//
// Texts longer than a tensor name may be (kMaxTensorNameLength) are
// INVALID_ARGUMENT naming the field and the length, without echoing them.
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

// Tensor ids are "t-" and 32 hex digits.
inline constexpr size_t kMaxTensorIdLength = 64;
// How many ids an ambiguous-name error lists.
inline constexpr size_t kMaxNameCandidates = 8;

// The id of the tensor `id_or_name` names for `caller`. `field` names the
// request field in errors ("tensor_id", "tensor_ids[2]").
absl::StatusOr<std::string> ResolveTensorId(const TensorStore& store, const Caller& caller,
                                            const std::string& id_or_name, absl::string_view field);

// The tensor `id_or_name` names, if `caller` sees it.
absl::StatusOr<std::shared_ptr<const Tensor>> GetVisibleTensor(const TensorStore& store,
                                                               const Caller& caller,
                                                               const std::string& id_or_name,
                                                               absl::string_view field);

// ResolveTensorId for every entry, in order (fields "<field>[i]"); the first
// error otherwise.
absl::StatusOr<std::vector<std::string>> ResolveTensorIds(const TensorStore& store,
                                                          const Caller& caller,
                                                          const std::vector<std::string>& ids,
                                                          absl::string_view field);

// The store's List, narrowed to what `caller` sees.
std::vector<std::shared_ptr<const Tensor>> ListVisibleTensors(const TensorStore& store,
                                                              const Caller& caller,
                                                              const TensorFilter& filter);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENANT_ACCESS_H_
