#include "server/view/device_import.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace placement::server {

absl::StatusOr<std::shared_ptr<const Tensor>> ImportDeviceTensor(TensorStore& store,
                                                                 const TensorSpec& spec,
                                                                 int64_t device_id,
                                                                 const std::string& handle,
                                                                 int64_t offset) {
  if (offset < 0) {
    return absl::InvalidArgumentError(absl::StrCat("offset must be >= 0, got ", offset));
  }
  if (handle.empty()) {
    return absl::InvalidArgumentError(
        "cuda_ipc_handle is empty: ImportTensor needs the exporting process's memory handle");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Tensor> tensor,
                   store.Allocate(spec.dtype, spec.shape, NamedSharding::SingleDevice(device_id),
                                  "", spec.name, spec.owner));
  DeviceBuffer& buffer = *tensor->shards.front().buffer;
  absl::Status copied = store.backend()->ImportForUpload(handle, offset, buffer.size(), buffer);
  if (absl::IsUnimplemented(copied)) {
    return absl::FailedPreconditionError(copied.message());
  }
  RETURN_IF_ERROR(copied);
  return store.Commit(std::move(tensor));
}

}  // namespace placement::server
