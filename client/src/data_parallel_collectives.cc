// DataParallel's collective: all_reduce_gradients (see data_parallel.h).
#include "absl/strings/str_cat.h"
#include "placement/client/collectives.h"
#include "placement/client/data_parallel.h"

namespace placement::client {

absl::StatusOr<TensorTree> DataParallel::all_reduce_gradients_static(
    const Client& client, const TensorTree& gradients, const std::string& reduce_type,
    const std::string& axis_name, SourceHandling source, Controller controller) {
  if (reduce_type != "mean" && reduce_type != "sum") {
    return absl::InvalidArgumentError(
        absl::StrCat("Unsupported reduce_type: ", reduce_type, ". Use 'mean' or 'sum'."));
  }
  if (axis_name.empty()) return absl::InvalidArgumentError("axis_name must not be empty");
  if (gradients.empty()) return TensorTree{};
  CollectiveOptions options;
  options.axes = {axis_name};
  options.source = source;
  options.controller = controller;
  absl::StatusOr<std::vector<TensorInfo>> reduced =
      CollectiveClient(client).AllReduceBatch(TreeIds(gradients), reduce_type, options);
  if (!reduced.ok()) return reduced.status();
  TensorTree out;
  size_t i = 0;
  for (const auto& [key, handle] : gradients) out.emplace(key, std::move((*reduced)[i++]));
  return out;
}

}  // namespace placement::client
