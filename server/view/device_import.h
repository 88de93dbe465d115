// ImportDeviceTensor: a single-device tensor made from device memory that a
// process on this host exported to the daemon (ViewService.ImportTensor;
// CUDA: a cudaIpcMemHandle_t), the upload direction of views. The tensor is
// allocated through the store (budgets and quotas as for an upload), filled
// by the platform's ImportForUpload (a device-to-device copy; the exporter's
// memory is not kept) and committed; Place shards it afterwards.
//
// Thread-safe (the store and backend are).
#ifndef PLACEMENT_SERVER_VIEW_DEVICE_IMPORT_H_
#define PLACEMENT_SERVER_VIEW_DEVICE_IMPORT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/tensor/tensor_spec.h"
#include "server/tensor/tensor_store.h"

namespace placement::server {

// INVALID_ARGUMENT: a negative offset or an empty handle; the store's
// Allocate errors (NOT_FOUND device, RESOURCE_EXHAUSTED budget or quota);
// FAILED_PRECONDITION when the platform has no device memory handles (its
// UNIMPLEMENTED, with the way to go instead); the platform's copy errors.
// Nothing is kept on error.
absl::StatusOr<std::shared_ptr<const Tensor>> ImportDeviceTensor(TensorStore& store,
                                                                 const TensorSpec& spec,
                                                                 int64_t device_id,
                                                                 const std::string& handle,
                                                                 int64_t offset);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_VIEW_DEVICE_IMPORT_H_
