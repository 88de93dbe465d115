// Umbrella header: the whole public client API of placementd.
//
//   #include "placement/client/placement.h"
//
//   auto client = placement::client::Client::Connect("127.0.0.1:50051");
//
// Value types (types.h, tensor_info.h, rules.h), connection and device
// calls (client.h), meshes (meshes.h), tensors (tensors.h, tensor_tree.h),
// views (views.h), collectives (collectives.h), prefetch (prefetch.h), JSON text (json.h) and
// the seed-named facades (device_mesh_manager.h, device_placement.h,
// data_parallel.h, loadax.h). No generated protobuf or gRPC header is included.
#ifndef PLACEMENT_CLIENT_PLACEMENT_H_
#define PLACEMENT_CLIENT_PLACEMENT_H_

#include "placement/client/client.h"               // IWYU pragma: export
#include "placement/client/collectives.h"          // IWYU pragma: export
#include "placement/client/data_parallel.h"        // IWYU pragma: export
#include "placement/client/device_mesh_manager.h"  // IWYU pragma: export
#include "placement/client/device_placement.h"     // IWYU pragma: export
#include "placement/client/json.h"                 // IWYU pragma: export
#include "placement/client/loadax.h"               // IWYU pragma: export
#include "placement/client/meshes.h"               // IWYU pragma: export
#include "placement/client/prefetch.h"             // IWYU pragma: export
#include "placement/client/regions.h"              // IWYU pragma: export
#include "placement/client/rules.h"                // IWYU pragma: export
#include "placement/client/tensor_info.h"          // IWYU pragma: export
#include "placement/client/tensor_tree.h"          // IWYU pragma: export
#include "placement/client/tensors.h"              // IWYU pragma: export
#include "placement/client/types.h"                // IWYU pragma: export
#include "placement/client/views.h"                // IWYU pragma: export

#endif  // PLACEMENT_CLIENT_PLACEMENT_H_
