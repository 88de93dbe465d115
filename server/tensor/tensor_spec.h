// Small value types that describe a tensor to create: what it holds
// (TensorSpec) and where it goes (ResolvedSharding, produced from a
// placement rule by PlacementResolver). Plain structs; thread-compatible.
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_SPEC_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>

#include "common/dtype.h"
#include "common/reduce_op.h"
#include "common/shape.h"
#include "common/sharding.h"
#include "server/tensor/tensor_owner.h"

namespace placement::server {

// Dtype, shape, and who a new tensor is for.
struct TensorSpec {
  DType dtype = DType::kF32;
  Shape shape;
  std::string name;
  TensorOwner owner;
};

// A sharding and the registered mesh it uses (empty for implicit meshes: a
// single device, or a "replica" mesh over explicit device ids).
struct ResolvedSharding {
  NamedSharding sharding = NamedSharding::SingleDevice(0);
  std::string mesh_id;
  // The reduction of the partial axes' contributions; nullopt without them.
  std::optional<ReduceOp> partial_op;
};

// What happens to the inputs of Place / Assemble / Disassemble.
enum class SourceHandling {
  kKeep,    // inputs stay; results are copies
  kDonate,  // inputs are deleted once the results exist (buffers move when possible)
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_SPEC_H_
