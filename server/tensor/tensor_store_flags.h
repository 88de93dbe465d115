// The tensor store's quota flags (--max_tensor_bytes_per_owner,
// --tenant_max_device_bytes, --tenant_max_tensors), declared and read in
// tensor_store_flags.cc; only placementd links them.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_STORE_FLAGS_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_STORE_FLAGS_H_

#include "server/tensor/tensor_store.h"

namespace placement::server {

TensorStoreOptions TensorStoreOptionsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_STORE_FLAGS_H_
