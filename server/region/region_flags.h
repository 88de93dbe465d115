// The shared-memory region flags (--region_socket, --region_socket_mode,
// --region_socket_group, --allow_shm_regions, --max_regions,
// --tenant_max_regions) and the bounds of shard views and in-place uploads
// (--max_exports, --tenant_max_exports, --max_upload_reservations,
// --upload_reservation_ttl: their fds travel on the same socket), declared and read in
// region_flags.cc; only placementd links them.
#ifndef PLACEMENT_SERVER_REGION_REGION_FLAGS_H_
#define PLACEMENT_SERVER_REGION_REGION_FLAGS_H_

#include <string>

#include "server/region/region_registry.h"
#include "server/view/export_options.h"

namespace placement::server {

// Where same-host clients pass region fds, and the registry's bounds.
struct RegionSettings {
  // A path, "@abstract", "auto" (region_socket_address.h) or "" (fd
  // passing off).
  std::string socket = "auto";
  // Permission bits (octal) and group of a path socket: who may connect.
  std::string socket_mode = "0660";
  std::string socket_group;
  RegionRegistryOptions registry;
  ExportOptions exports;
};

RegionSettings RegionSettingsFromFlags();

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_REGION_FLAGS_H_
