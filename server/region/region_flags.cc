#include "server/region/region_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, region_socket, "auto",
          "Unix socket through which same-host clients pass shared-memory fds for regions "
          "(docs/api/regions.md): a path, '@name' for an abstract socket, 'auto' (LISTEN_PATH"
          ".regions with a unix --listen, else placementd-regions-INSTANCE.sock in "
          "$RUNTIME_DIRECTORY, $XDG_RUNTIME_DIR or /tmp), or '' to turn fd passing off.");
ABSL_FLAG(std::string, region_socket_mode, "0660",
          "Permission bits (octal) of a filesystem --region_socket: who on the host may pass "
          "fds to the daemon (docs/security.md).");
ABSL_FLAG(std::string, region_socket_group, "",
          "Group (name or id) of a filesystem --region_socket; empty = the daemon's own.");
ABSL_FLAG(bool, allow_shm_regions, false,
          "Also accept POSIX shm names for regions, within a session only. They cannot be "
          "sealed, so the daemon reads and writes them through their fd (a client that shrinks "
          "one fails its own transfer); an extra copy next to fd passing.");
ABSL_FLAG(int64_t, max_regions, 1024, "Shared-memory regions registered at once; 0 = unlimited.");
ABSL_FLAG(int64_t, tenant_max_regions, 0,
          "Shared-memory regions one tenant may have registered at once; 0 = unlimited.");

ABSL_FLAG(int64_t, max_exports, 4096,
          "Shard views (ViewService exports) open at once, over all tenants; 0 = unlimited. "
          "Each holds its tensor's memory until it ends (docs/api/views.md).");
ABSL_FLAG(int64_t, tenant_max_exports, 1024,
          "Shard views one tenant may have open at once; 0 = unlimited.");

ABSL_FLAG(int64_t, max_upload_reservations, 256,
          "Uploads written in place (ViewService.ReserveUpload) open at once, over all "
          "tenants; 0 = unlimited. Each holds its tensor's memory until committed, cancelled "
          "or expired (docs/api/views.md).");
ABSL_FLAG(int64_t, tenant_max_upload_reservations, 64,
          "Uploads written in place one tenant may have open at once; 0 = unlimited.");
ABSL_FLAG(absl::Duration, upload_reservation_ttl, absl::Seconds(60),
          "How long an upload reservation waits for the redemption of its token before its "
          "memory is freed; a redeemed one lasts until its commit, cancel or its writer's exit.");

namespace placement::server {

RegionSettings RegionSettingsFromFlags() {
  RegionSettings settings;
  settings.socket = absl::GetFlag(FLAGS_region_socket);
  settings.socket_mode = absl::GetFlag(FLAGS_region_socket_mode);
  settings.socket_group = absl::GetFlag(FLAGS_region_socket_group);
  settings.registry.allow_shm_names = absl::GetFlag(FLAGS_allow_shm_regions);
  settings.registry.max_regions = absl::GetFlag(FLAGS_max_regions);
  settings.registry.max_regions_per_tenant = absl::GetFlag(FLAGS_tenant_max_regions);
  settings.exports.max_exports = absl::GetFlag(FLAGS_max_exports);
  settings.exports.max_exports_per_tenant = absl::GetFlag(FLAGS_tenant_max_exports);
  settings.exports.uploads.max_open = absl::GetFlag(FLAGS_max_upload_reservations);
  settings.exports.uploads.max_open_per_tenant =
      absl::GetFlag(FLAGS_tenant_max_upload_reservations);
  settings.exports.uploads.ttl = absl::GetFlag(FLAGS_upload_reservation_ttl);
  return settings;
}

}  // namespace placement::server
