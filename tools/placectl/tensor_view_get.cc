#include "tools/placectl/tensor_view_get.h"

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "placement/client/regions.h"
#include "placement/client/tensors.h"
#include "tools/placectl/npy.h"

namespace placement::placectl {
namespace {

// Written in pieces, so that the progress bar moves as for a download.
constexpr size_t kPieceBytes = size_t{16} << 20;

absl::Status WriteNpy(const std::string& path, client::DType dtype,
                      const std::vector<int64_t>& shape, std::span<const std::byte> bytes,
                      const client::ProgressFn& progress) {
  absl::StatusOr<std::unique_ptr<NpyWriter>> writer = NpyWriter::Create(path, dtype, shape);
  if (!writer.ok()) return writer.status();
  size_t done = 0;
  do {
    const size_t n = std::min(kPieceBytes, bytes.size() - done);
    absl::Status written =
        (*writer)->Write({reinterpret_cast<const uint8_t*>(bytes.data()) + done, n});
    if (!written.ok()) return written;
    done += n;
    if (progress) progress(static_cast<int64_t>(done), static_cast<int64_t>(bytes.size()));
  } while (done < bytes.size());
  return (*writer)->Finish();
}

}  // namespace

std::optional<absl::StatusOr<client::DownloadHeader>> GetThroughView(
    const client::Client& client, const std::string& id, const std::string& path,
    std::optional<int64_t> device, const client::ProgressFn& progress) {
  absl::StatusOr<bool> same_host = client::RegionClient(client).SameHost();
  if (!same_host.ok() || !*same_host) return std::nullopt;
  absl::StatusOr<std::unique_ptr<client::TensorView>> view = client::TensorClient(client).View(id);
  if (!view.ok()) {
    if (absl::IsFailedPrecondition(view.status()) || absl::IsUnimplemented(view.status())) {
      return std::nullopt;
    }
    return view.status();
  }
  const client::TensorInfo& tensor = (*view)->tensor();
  client::DownloadHeader header;
  header.dtype = tensor.dtype;
  if (device.has_value()) {
    for (const client::TensorView::Shard& shard : (*view)->shards()) {
      if (shard.info.device_id != *device) continue;
      if (shard.bytes.size() != static_cast<size_t>(shard.info.size_bytes)) return std::nullopt;
      header.shape = shard.info.shape;
      header.total_bytes = shard.info.size_bytes;
      absl::Status written = WriteNpy(path, tensor.dtype, header.shape, shard.bytes, progress);
      if (!written.ok()) return written;
      return header;
    }
    return std::nullopt;  // the download says why
  }
  header.shape = tensor.shape;
  header.total_bytes = tensor.size_bytes;
  // One shard holding the whole array (a single device, a replica): its
  // memory goes to the file as it is.
  for (const client::TensorView::Shard& shard : (*view)->shards()) {
    if (shard.info.shape == tensor.shape && tensor.sharding.partial_axes.empty() &&
        shard.bytes.size() == static_cast<size_t>(tensor.size_bytes)) {
      absl::Status written = WriteNpy(path, tensor.dtype, header.shape, shard.bytes, progress);
      if (!written.ok()) return written;
      return header;
    }
  }
  std::vector<std::byte> whole(static_cast<size_t>(tensor.size_bytes));
  if (!(*view)->CopyTo(whole).ok()) return std::nullopt;
  absl::Status written = WriteNpy(path, tensor.dtype, header.shape, whole, progress);
  if (!written.ok()) return written;
  return header;
}

}  // namespace placement::placectl
