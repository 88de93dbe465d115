// ExportAndRedeem: the first two steps every same-host read of a daemon's
// shards takes (docs/api/views.md): ExportShards, then the redemption of its
// token on the region socket. Shared by TensorView::Open and downloads read
// in place (tensors_inplace.h). Not installed.
#ifndef PLACEMENT_CLIENT_SRC_SHARD_EXPORT_H_
#define PLACEMENT_CLIENT_SRC_SHARD_EXPORT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/v1/view_service.pb.h"

namespace placement::client {

struct RedeemedExport {
  placement::v1::ExportShardsResponse response;
  std::vector<int> fds;  // owned by the caller, in fd_index order
};

// Exports `request` and redeems its token on `socket` (the daemon's region
// socket). When the redemption fails the export is ended (Unexport) before
// the error returns; otherwise ending it is the caller's.
absl::StatusOr<RedeemedExport> ExportAndRedeem(const Client& client, const std::string& socket,
                                               const placement::v1::ExportShardsRequest& request);

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_SRC_SHARD_EXPORT_H_
