#include "server/tensor/tenant_access.h"

#include "absl/strings/str_cat.h"

namespace placement::server {

absl::StatusOr<std::shared_ptr<const Tensor>> GetVisibleTensor(const TensorStore& store,
                                                               const Caller& caller,
                                                               const std::string& id,
                                                               absl::string_view field) {
  if (id.size() > kMaxTensorIdLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is ", id.size(), " bytes long; tensor ids are at most ", kMaxTensorIdLength));
  }
  absl::StatusOr<std::shared_ptr<const Tensor>> tensor = store.Get(id);
  if (!tensor.ok()) return tensor.status();
  if (!caller.Sees((*tensor)->owner.tenant)) {
    // The same words as TensorStore::Get for an unknown id.
    return absl::NotFoundError(absl::StrCat("tensor '", id, "' does not exist"));
  }
  return tensor;
}

absl::Status CheckTensorsVisible(const TensorStore& store, const Caller& caller,
                                 const std::vector<std::string>& ids, absl::string_view field) {
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<std::shared_ptr<const Tensor>> tensor =
        GetVisibleTensor(store, caller, ids[i], absl::StrCat(field, "[", i, "]"));
    if (!tensor.ok()) return tensor.status();
  }
  return absl::OkStatus();
}

std::vector<std::shared_ptr<const Tensor>> ListVisibleTensors(const TensorStore& store,
                                                              const Caller& caller,
                                                              const TensorFilter& filter) {
  std::vector<std::shared_ptr<const Tensor>> out = store.List(filter);
  if (caller.admin()) return out;
  std::erase_if(out, [&](const auto& tensor) { return !caller.Sees(tensor->owner.tenant); });
  return out;
}

}  // namespace placement::server
