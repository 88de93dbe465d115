// Pytree-like dicts for the seed facades (DevicePlacement, DataParallel):
//
//   TensorTree  key -> daemon tensor ({"images": "t-…", "labels": info}).
//               A TensorHandle converts implicitly from a tensor id or from
//               the TensorInfo a call returned, so results feed straight
//               into the next call.
//   HostTree    key -> host array the caller owns ({"images": HostArray…});
//               placing one uploads every array in one UploadBatch stream.
//   DownloadedTree  key -> bytes downloaded from the daemon, owned by the
//               tree (loadax global_to_host_array); AsHostTree views them
//               as a HostTree to upload again.
//
// PlaceTree and UploadTree apply one Rule to every leaf, all or nothing,
// and return a tree with the same keys whose handles carry full TensorInfo.
//
// Values; thread-compatible. The functions are thread-safe.
#ifndef PLACEMENT_CLIENT_TENSOR_TREE_H_
#define PLACEMENT_CLIENT_TENSOR_TREE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "placement/client/rules.h"
#include "placement/client/tensor_info.h"
#include "placement/client/tensors.h"

namespace placement::client {

// A daemon tensor: its id, plus its TensorInfo when known.
class TensorHandle {
 public:
  TensorHandle(std::string tensor_id);  // NOLINT(google-explicit-constructor)
  TensorHandle(const char* tensor_id);  // NOLINT(google-explicit-constructor)
  TensorHandle(TensorInfo info);        // NOLINT(google-explicit-constructor)

  const std::string& id() const { return info_.id; }
  // Full description when built from a TensorInfo; else only its id is set.
  const TensorInfo& info() const { return info_; }
  bool has_info() const { return has_info_; }

 private:
  TensorInfo info_;
  bool has_info_ = false;
};

using TensorTree = std::map<std::string, TensorHandle>;
using HostTree = std::map<std::string, HostArray>;
using DownloadedTree = std::map<std::string, DownloadedBytes>;

// Views of `tree`'s bytes (dtype and shape from each header); valid while
// `tree` is alive and unchanged.
HostTree AsHostTree(const DownloadedTree& tree);

// The tree's tensor ids in key order.
std::vector<std::string> TreeIds(const TensorTree& tree);

// Place(every leaf, rule, source); an empty tree returns an empty tree
// without calling the daemon.
absl::StatusOr<TensorTree> PlaceTree(const TensorClient& tensors, const TensorTree& tree,
                                     const Rule& rule,
                                     SourceHandling source = SourceHandling::kKeep);
// UploadBatch(every leaf, rule): one stream, all or nothing. Tensors are
// named "<options.name>/<key>" when options.name is set.
absl::StatusOr<TensorTree> UploadTree(const TensorClient& tensors, const HostTree& tree,
                                      const Rule& rule, const UploadOptions& options = {});

}  // namespace placement::client

#endif  // PLACEMENT_CLIENT_TENSOR_TREE_H_
