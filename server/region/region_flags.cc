#include "server/region/region_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, region_socket, "auto",
          "Unix socket through which same-host clients pass shared-memory fds for regions "
          "(docs/api/regions.md): a path, '@name' for an abstract socket, 'auto' (LISTEN_PATH"
          ".regions with a unix --listen, else an abstract socket named after the instance), or "
          "'' to turn fd passing off.");
ABSL_FLAG(bool, allow_shm_regions, false,
          "Also accept POSIX shm names for regions (they cannot be sealed: a client that shrinks "
          "one can crash the daemon; only for trusted clients).");
ABSL_FLAG(int64_t, max_regions, 1024, "Shared-memory regions registered at once; 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_regions, 0,
          "Shared-memory regions one tenant may have registered at once; 0 = unlimited.");

namespace placement::server {

RegionSettings RegionSettingsFromFlags() {
  RegionSettings settings;
  settings.socket = absl::GetFlag(FLAGS_region_socket);
  settings.registry.allow_shm_names = absl::GetFlag(FLAGS_allow_shm_regions);
  settings.registry.max_regions = absl::GetFlag(FLAGS_max_regions);
  settings.registry.max_regions_per_tenant = absl::GetFlag(FLAGS_tenant_max_regions);
  return settings;
}

}  // namespace placement::server
