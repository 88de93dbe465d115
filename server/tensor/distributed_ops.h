// DistributedOps: the tensor operations whose sources or results have shards
// on other daemons of a cluster (docs/cluster.md), as TensorOps hands them
// over. Each runs in two phases on every daemon that holds shards of the
// result -- prepare this daemon's shards, then commit the record on every
// daemon -- so the result exists everywhere or nowhere. Implemented by
// server/cluster/cluster_ops.h.
//
// Thread-safe.
#ifndef PLACEMENT_SERVER_TENSOR_DISTRIBUTED_OPS_H_
#define PLACEMENT_SERVER_TENSOR_DISTRIBUTED_OPS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tensor/tensor.h"
#include "server/tensor/tensor_spec.h"

namespace placement::server {

class DistributedOps {
 public:
  virtual ~DistributedOps() = default;

  // device_put of `source` to `target`; the source is untouched. Errors as
  // Reshard's, and UNAVAILABLE naming a lost daemon.
  virtual absl::StatusOr<std::shared_ptr<const Tensor>> Place(const Tensor& source,
                                                              const ResolvedSharding& target,
                                                              std::string name,
                                                              TensorOwner owner) = 0;
  // AssembleTensor / DisassembleTensor across daemons, committed.
  virtual absl::StatusOr<std::shared_ptr<const Tensor>> Assemble(
      Shape global_shape, const ResolvedSharding& target, const std::vector<std::string>& ids,
      SourceHandling source, std::string name) = 0;
  virtual absl::StatusOr<std::vector<std::shared_ptr<const Tensor>>> Disassemble(
      const std::string& id, SourceHandling source) = 0;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_DISTRIBUTED_OPS_H_
