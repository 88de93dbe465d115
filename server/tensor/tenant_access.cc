#include "server/tensor/tenant_access.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/tensor/label_limits.h"

namespace placement::server {
namespace {

// The same words as TensorStore::Get for an unknown id.
absl::Status Unknown(const std::string& id_or_name) {
  return absl::NotFoundError(absl::StrCat("tensor '", id_or_name, "' does not exist"));
}

}  // namespace

absl::StatusOr<std::string> ResolveTensorId(const TensorStore& store, const Caller& caller,
                                            const std::string& id_or_name,
                                            absl::string_view field) {
  if (id_or_name.size() > std::max(kMaxTensorIdLength, kMaxTensorNameLength)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is ", id_or_name.size(),
                                                   " bytes long; tensor ids and names are at most ",
                                                   kMaxTensorNameLength));
  }
  if (absl::StatusOr<std::shared_ptr<const Tensor>> tensor = store.Get(id_or_name);
      tensor.ok() && caller.Sees((*tensor)->owner.tenant)) {
    return id_or_name;
  }
  if (id_or_name.empty()) return Unknown(id_or_name);
  std::vector<std::string> named;
  for (TensorStore::NamedId& n : store.IdsNamed(id_or_name)) {
    if (caller.Sees(n.tenant)) named.push_back(std::move(n.id));
  }
  if (named.empty()) return Unknown(id_or_name);
  if (named.size() == 1) return named.front();
  const size_t total = named.size();
  if (named.size() > kMaxNameCandidates) named.resize(kMaxNameCandidates);
  return absl::FailedPreconditionError(
      absl::StrCat(field, " '", id_or_name, "' is the name of ", total, " tensors (",
                   absl::StrJoin(named, ", "), total > named.size() ? ", ..." : "",
                   "); give one of their ids, or delete or rename the others"));
}

absl::StatusOr<std::shared_ptr<const Tensor>> GetVisibleTensor(const TensorStore& store,
                                                               const Caller& caller,
                                                               const std::string& id_or_name,
                                                               absl::string_view field) {
  absl::StatusOr<std::string> id = ResolveTensorId(store, caller, id_or_name, field);
  if (!id.ok()) return id.status();
  absl::StatusOr<std::shared_ptr<const Tensor>> tensor = store.Get(*id);
  if (!tensor.ok()) return Unknown(id_or_name);  // deleted meanwhile
  return tensor;
}

absl::StatusOr<std::vector<std::string>> ResolveTensorIds(const TensorStore& store,
                                                          const Caller& caller,
                                                          const std::vector<std::string>& ids,
                                                          absl::string_view field) {
  std::vector<std::string> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<std::string> id =
        ResolveTensorId(store, caller, ids[i], absl::StrCat(field, "[", i, "]"));
    if (!id.ok()) return id.status();
    out.push_back(*std::move(id));
  }
  return out;
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
