// placectl tensor get through a view (docs/api/views.md): against a daemon on
// this host, the whole array or one device's shard is read from the daemon's
// own memory and written to the .npy file, without a download.
#ifndef PLACEMENT_TOOLS_PLACECTL_TENSOR_VIEW_GET_H_
#define PLACEMENT_TOOLS_PLACECTL_TENSOR_VIEW_GET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "placement/client/client.h"
#include "placement/client/tensors.h"
#include "placement/client/types.h"

namespace placement::placectl {

// Writes tensor `id` (or, with `device`, that device's shard) to `path`
// from a view and returns what a download's header would say. nullopt when
// a view cannot serve it -- another host, a CUDA daemon, shards on other
// nodes, no shard on `device` -- and the caller downloads instead; the
// daemon's and the file's errors otherwise.
// `progress` (nullable) is told the bytes written, as a download's.
std::optional<absl::StatusOr<client::DownloadHeader>> GetThroughView(
    const client::Client& client, const std::string& id, const std::string& path,
    std::optional<int64_t> device, const client::ProgressFn& progress);

}  // namespace placement::placectl

#endif  // PLACEMENT_TOOLS_PLACECTL_TENSOR_VIEW_GET_H_
