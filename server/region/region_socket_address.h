// Where the region socket listens and who may connect, from the flags
// (--region_socket, --region_socket_mode, --region_socket_group).
//
// "auto" is a filesystem socket, whose mode and group decide who on the host
// may connect: LISTEN_PATH.regions beside a unix --listen socket; otherwise
// placementd-regions-INSTANCE.sock in $RUNTIME_DIRECTORY (systemd's
// RuntimeDirectory=, /run/placementd under the shipped unit), else
// $XDG_RUNTIME_DIR, else /tmp. "@name" asks for an abstract socket (open to
// the whole network namespace: for Kubernetes pods that share one).
//
// Thread-safe (pure functions of their arguments and the environment).
#ifndef PLACEMENT_SERVER_REGION_REGION_SOCKET_ADDRESS_H_
#define PLACEMENT_SERVER_REGION_REGION_SOCKET_ADDRESS_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/region/listening_unix_socket.h"

namespace placement::server {

// The address for `flag` ("auto", a path, "@name", or "" = off). `unix_listen`
// is the gRPC unix socket path ("" for a TCP --listen).
std::string ResolveRegionSocket(const std::string& flag, const std::string& unix_listen,
                                const std::string& instance_id);

// `mode` is octal ("0660"); `group` a name, a number, or "" (the daemon's
// own). INVALID_ARGUMENT naming the flag otherwise (a mode outside 0..0777,
// or that leaves the owner without read and write).
absl::StatusOr<SocketAccess> ParseSocketAccess(const std::string& mode, const std::string& group);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_REGION_REGION_SOCKET_ADDRESS_H_
