#include "server/region/region_socket_address.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace placement::server {

std::string ResolveRegionSocket(const std::string& flag, const std::string& unix_listen,
                                const std::string& instance_id) {
  if (flag != "auto") return flag;
  if (!unix_listen.empty()) return absl::StrCat(unix_listen, ".regions");
  std::string dir = "/tmp";
  for (const char* variable : {"RUNTIME_DIRECTORY", "XDG_RUNTIME_DIR"}) {
    const char* value = std::getenv(variable);
    if (value != nullptr && value[0] == '/') {
      // systemd may list several runtime directories, ':'-separated.
      dir = std::string(value).substr(0, std::string(value).find(':'));
      break;
    }
  }
  return absl::StrCat(dir, "/placementd-regions-", instance_id, ".sock");
}

absl::StatusOr<SocketAccess> ParseSocketAccess(const std::string& mode, const std::string& group) {
  SocketAccess access;
  char* end = nullptr;
  const unsigned long bits = mode.empty() ? ~0ul : std::strtoul(mode.c_str(), &end, 8);
  if (mode.empty() || *end != '\0' || bits > 0777) {
    return absl::InvalidArgumentError(
        absl::StrCat("--region_socket_mode='", mode.substr(0, 16),
                     "' is not an octal mode between 0 and 0777 (e.g. 0660)"));
  }
  if ((bits & 0600) != 0600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--region_socket_mode=", mode,
                     " must let the owner read and write (0600 at least), so that a restarted "
                     "daemon can tell a live socket from a stale one"));
  }
  access.mode = static_cast<mode_t>(bits);
  if (!group.empty()) {
    absl::StatusOr<gid_t> gid = ParseGroup("--region_socket_group", group);
    if (!gid.ok()) return gid.status();
    access.group = *gid;
  }
  return access;
}

}  // namespace placement::server
