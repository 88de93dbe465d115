// ListenUnixSocket: a listening unix stream socket at a filesystem path or,
// for "@name", in the Linux abstract namespace -- the region socket's
// address handling, apart from what is served on it.
//
// A path socket gets the permission bits `mode` and the group `group` before
// it listens (so no connection is accepted under looser ones), which is what
// decides who on the host may connect: with 0660 and a group, the daemon's
// user and that group's members. A stale socket file left by a crashed daemon
// is replaced; a live one is not. An abstract socket has no file and no
// permissions: every process in the daemon's network namespace can connect.
//
// Thread-safe (pure functions).
#ifndef PLACEMENT_SERVER_REGION_LISTENING_UNIX_SOCKET_H_
#define PLACEMENT_SERVER_REGION_LISTENING_UNIX_SOCKET_H_

#include <sys/types.h>

#include <string>

#include "absl/status/statusor.h"

namespace placement::server {

// For SocketAccess::group: keep the daemon's own group.
inline constexpr gid_t kOwnGroup = static_cast<gid_t>(-1);

struct SocketAccess {
  mode_t mode = 0660;
  gid_t group = kOwnGroup;
};

// A non-blocking, close-on-exec listening socket at `address`.
// INVALID_ARGUMENT for an empty or too long address; UNAVAILABLE when it
// cannot be bound (a live listener owns it) or the mode/group cannot be set.
absl::StatusOr<int> ListenUnixSocket(const std::string& address, const SocketAccess& access);

// The group id of `name` (a group name or a number). INVALID_ARGUMENT naming
// `flag` when there is no such group.
absl::StatusOr<gid_t> ParseGroup(const std::string& flag, const std::string& name);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_LISTENING_UNIX_SOCKET_H_
