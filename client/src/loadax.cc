// loadax's host_to_global_device_array / global_to_host_array (loadax.h):
// a DataPartition upload, optionally process-local, and Downloads of this
// process's shards.
#include "placement/client/loadax.h"

#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace placement::client {
namespace {

absl::Status CheckPartition(DataPartition partition) {
  if (partition == DataPartition::kFull || partition == DataPartition::kReplicated) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("Unsupported partition: ", static_cast<int>(partition)));
}

// Every leaf's TensorInfo: the handle's own, else Describe's.
absl::StatusOr<std::vector<TensorInfo>> LeafInfos(const TensorClient& tensors,
                                                  const TensorTree& tree) {
  std::vector<TensorInfo> infos;
  infos.reserve(tree.size());
  for (const auto& [key, handle] : tree) {
    if (handle.id().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("tree['", key, "'] has no tensor id"));
    }
    if (handle.has_info()) {
      infos.push_back(handle.info());
      continue;
    }
    absl::StatusOr<TensorInfo> info = tensors.Describe(handle.id());
    if (!info.ok()) return info.status();
    infos.push_back(*std::move(info));
  }
  return infos;
}

// loadax's FULL checks: every leaf has a batch dimension, the same for all.
absl::Status CheckBatchDimensions(const TensorTree& tree, const std::vector<TensorInfo>& infos) {
  const std::string* first_key = nullptr;
  int64_t batch = 0;
  size_t i = 0;
  for (const auto& [key, handle] : tree) {
    const TensorInfo& info = infos[i++];
    if (info.shape.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "global_to_host_array: '", key, "' is a scalar; FULL partition needs a batch dimension"));
    }
    if (first_key == nullptr) {
      first_key = &key;
      batch = info.shape[0];
    } else if (info.shape[0] != batch) {
      return absl::InvalidArgumentError(absl::StrCat("global_to_host_array: batch size mismatch: '",
                                                     key, "' has ", info.shape[0], " rows, '",
                                                     *first_key, "' has ", batch));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TensorTree> host_to_global_device_array(const Client& client,
                                                       const HostTree& host_arrays,
                                                       const MeshRef& mesh, DataPartition partition,
                                                       const std::string& global_name) {
  absl::Status partition_ok = CheckPartition(partition);
  if (!partition_ok.ok()) return partition_ok;
  if (global_name.empty()) {
    return UploadTree(TensorClient(client), host_arrays, Rule::DataPartition(mesh, partition));
  }
  return host_to_global_device_array(client, host_arrays, mesh, partition,
                                     ProcessLocal{.global_name = global_name});
}

absl::StatusOr<TensorTree> host_to_global_device_array(const Client& client,
                                                       const HostTree& host_arrays,
                                                       const MeshRef& mesh, DataPartition partition,
                                                       const ProcessLocal& process_local) {
  absl::Status partition_ok = CheckPartition(partition);
  if (!partition_ok.ok()) return partition_ok;
  UploadOptions options;
  options.process_local = process_local;
  return UploadTree(TensorClient(client), host_arrays, Rule::DataPartition(mesh, partition),
                    options);
}

absl::StatusOr<DownloadedTree> global_to_host_array(const Client& client,
                                                    const TensorTree& global_arrays,
                                                    DataPartition partition) {
  absl::Status partition_ok = CheckPartition(partition);
  if (!partition_ok.ok()) return partition_ok;
  if (global_arrays.empty()) return DownloadedTree{};
  TensorClient tensors(client);
  absl::StatusOr<std::vector<TensorInfo>> infos = LeafInfos(tensors, global_arrays);
  if (!infos.ok()) return infos.status();
  if (partition == DataPartition::kFull) {
    absl::Status batch_ok = CheckBatchDimensions(global_arrays, *infos);
    if (!batch_ok.ok()) return batch_ok;
  }
  absl::StatusOr<DaemonStatus> status = client.GetStatus();
  if (!status.ok()) return status.status();
  const int32_t process = status->process_index;

  DownloadedTree out;
  size_t i = 0;
  for (const auto& [key, handle] : global_arrays) {
    const TensorInfo& info = (*infos)[i++];
    DownloadSelection selection = DownloadSelection::Process(process);
    if (partition == DataPartition::kReplicated) {
      const ShardInfo* local = nullptr;
      for (const ShardInfo& shard : info.shards) {
        if (shard.process_index == process) {
          local = &shard;
          break;
        }
      }
      if (local == nullptr) {
        return absl::NotFoundError(absl::StrCat("global_to_host_array: tensor '", info.id, "' ('",
                                                key, "') has no shard on process ", process));
      }
      selection = DownloadSelection::Device(local->device_id);
    }
    absl::StatusOr<DownloadedBytes> bytes = tensors.DownloadBytes(info.id, selection);
    if (!bytes.ok()) return bytes.status();
    out.emplace(key, *std::move(bytes));
  }
  return out;
}

}  // namespace placement::client
