#include "placement/client/tensor_tree.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace placement::client {

TensorHandle::TensorHandle(std::string tensor_id) { info_.id = std::move(tensor_id); }
TensorHandle::TensorHandle(const char* tensor_id) {
  info_.id = tensor_id == nullptr ? "" : tensor_id;
}
TensorHandle::TensorHandle(TensorInfo info) : info_(std::move(info)), has_info_(true) {}

std::vector<std::string> TreeIds(const TensorTree& tree) {
  std::vector<std::string> ids;
  ids.reserve(tree.size());
  for (const auto& [key, handle] : tree) ids.push_back(handle.id());
  return ids;
}

HostTree AsHostTree(const DownloadedTree& tree) {
  HostTree out;
  for (const auto& [key, downloaded] : tree) {
    out.emplace(key, HostArray{downloaded.header.dtype, downloaded.header.shape,
                               absl::MakeConstSpan(downloaded.bytes)});
  }
  return out;
}

absl::StatusOr<TensorTree> PlaceTree(const TensorClient& tensors, const TensorTree& tree,
                                     const Rule& rule, SourceHandling source) {
  if (tree.empty()) return TensorTree{};
  for (const auto& [key, handle] : tree) {
    if (handle.id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tree['", key, "'] has no tensor id"));
    }
  }
  auto placed = tensors.Place(TreeIds(tree), rule, source);
  if (!placed.ok()) return placed.status();
  TensorTree out;
  size_t i = 0;
  for (const auto& [key, handle] : tree) out.emplace(key, std::move((*placed)[i++]));
  return out;
}

absl::StatusOr<TensorTree> UploadTree(const TensorClient& tensors, const HostTree& tree,
                                      const Rule& rule, const UploadOptions& options) {
  if (tree.empty()) return TensorTree{};
  std::vector<BatchArray> arrays;
  arrays.reserve(tree.size());
  for (const auto& [key, array] : tree) arrays.push_back(BatchArray{key, array});
  auto uploaded = tensors.UploadBatch(arrays, rule, options);
  if (!uploaded.ok()) return uploaded.status();
  TensorTree out;
  for (auto& named : *uploaded) out.emplace(named.key, std::move(named.tensor));
  if (out.size() != tree.size()) {
    return absl::InternalError(absl::StrCat("UploadBatch of ", tree.size(), " arrays returned ",
                                            out.size(), " distinct keys"));
  }
  return out;
}

}  // namespace placement::client
