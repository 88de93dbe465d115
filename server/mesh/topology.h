// Topology-aware device ordering for meshes built from "the first N devices".
//
// A mesh lays its device ids out row-major, so consecutive devices in the
// order returned here end up on the innermost (fastest-varying) mesh axis,
// which is where frameworks put the most communication-heavy parallelism
// (model / tensor parallel). The order therefore keeps devices that are close
// to each other adjacent:
//   * CPU virtual devices (and any platform that reports no topology): local
//     index order.
//   * GPUs: grouped by NUMA node (known nodes first, ascending; unknown last),
//     then by PCI bus id (domain:bus:device.function compared
//     case-insensitively, so devices behind the same PCIe switch, which share
//     the bus prefix, are neighbours), then by local index.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_MESH_TOPOLOGY_H_
#define PLACEMENT_SERVER_MESH_TOPOLOGY_H_

#include <cstdint>
#include <vector>

#include "server/device/device_backend.h"

namespace placement::server {

// Global device ids of `devices` in topology order (see above). Stable:
// devices that compare equal keep their input order.
std::vector<int64_t> TopologyOrder(const std::vector<DeviceDescription>& devices);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_MESH_TOPOLOGY_H_
