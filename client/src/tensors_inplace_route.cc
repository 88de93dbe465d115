// RouteInPlace (tensors_inplace.h): whether a transfer goes in place.
#include "client/src/tensors_inplace.h"

namespace placement::client {

std::optional<absl::StatusOr<InPlaceRoute>> RouteInPlace(const Client& client, TransferPath path,
                                                         int64_t bytes) {
  const bool forced = path == TransferPath::kInPlace;
  if (!forced && (path != TransferPath::kAuto || bytes < kInPlaceMinBytes)) return std::nullopt;
  InPlaceRoute route{RegionPool::For(client), ""};
  if (!forced && route.pool->in_place_declined()) return std::nullopt;
  absl::StatusOr<bool> same_host = route.pool->UseRegion(path, bytes);
  if (!same_host.ok()) return same_host.status();
  if (!*same_host) return std::nullopt;
  absl::StatusOr<std::string> socket = route.pool->SameHostSocket();
  if (!socket.ok()) return socket.status();
  route.socket = *std::move(socket);
  return route;
}

}  // namespace placement::client
