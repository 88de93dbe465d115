// The shared-memory region flags (--region_socket, --allow_shm_regions,
// --max_regions, --tenant_max_regions), declared and read in
// region_flags.cc; only placementd links them.
#ifndef PLACEMENT_SERVER_REGION_REGION_FLAGS_H_
#define PLACEMENT_SERVER_REGION_REGION_FLAGS_H_

#include <string>

#include "server/region/region_registry.h"

namespace placement::server {

// Where same-host clients pass region fds, and the registry's bounds.
struct RegionSettings {
  // A path, "@abstract", "auto" (LISTEN_PATH.regions for a unix listen
  // address, else "@placementd-regions-INSTANCE") or "" (fd passing off).
  std::string socket = "auto";
  RegionRegistryOptions registry;
};

RegionSettings RegionSettingsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_REGION_FLAGS_H_
