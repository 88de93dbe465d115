// MemoryOwnerTag: whose bytes a device block may hold over its whole life
// (DeviceBackend "Memory owners"). TensorStore numbers tenants 1, 2, ...;
// kDaemonMemory is the daemon's own (staging, private copies).
#ifndef PLACEMENT_SERVER_DEVICE_MEMORY_OWNER_H_
#define PLACEMENT_SERVER_DEVICE_MEMORY_OWNER_H_

#include <cstdint>

namespace placement::server {

using MemoryOwnerTag = uint32_t;
inline constexpr MemoryOwnerTag kDaemonMemory = 0;

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_DEVICE_MEMORY_OWNER_H_
