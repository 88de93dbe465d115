#include "server/tensor/tensor_store_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(int64_t, max_tensor_bytes_per_owner, 0,
          "Quota of tensor bytes per owner (client-chosen owner string); 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_device_bytes, 0,
          "Quota of device bytes per tenant, each shard buffer rounded up to 4 KiB; 0 = "
          "unlimited.");
ABSL_FLAG(int64_t, tenant_max_tensors, 100000,
          "Quota of tensors per tenant (each costs host memory for its records besides its "
          "device bytes); 0 = unlimited.");

namespace placement::server {

TensorStoreOptions TensorStoreOptionsFromFlags() {
  TensorStoreOptions options;
  options.max_bytes_per_owner = absl::GetFlag(FLAGS_max_tensor_bytes_per_owner);
  options.max_device_bytes_per_tenant = absl::GetFlag(FLAGS_tenant_max_device_bytes);
  options.max_tensors_per_tenant = absl::GetFlag(FLAGS_tenant_max_tensors);
  return options;
}

}  // namespace placement::server
