// Tensor: one logical array held by the daemon as one buffer per device
// shard (replicas share nothing), like an IFRT Array. Bytes are row-major,
// little-endian, unpadded; each shard buffer holds exactly its box
// (ShardDomain::box) of the global array in row-major order.
//
// A Tensor is immutable once committed to the TensorStore, except that
// collectives may overwrite shard bytes of a tensor they own exclusively
// (see TensorStore::TakeForDonation).
#ifndef PLACEMENT_SERVER_TENSOR_TENSOR_H_
#define PLACEMENT_SERVER_TENSOR_TENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/reduce_op.h"
#include "common/shape.h"
#include "common/sharding.h"
#include "server/device/device_backend.h"
#include "server/tensor/tensor_owner.h"

namespace placement::server {

struct Shard {
  ShardDomain domain;  // device, box, replica id
  // Exactly box bytes. Null for a device of another daemon of the cluster
  // (that daemon holds the bytes; docs/cluster.md).
  std::unique_ptr<DeviceBuffer> buffer;
  // The daemon (node) whose device holds the shard.
  int32_t process_index = 0;

  bool local() const { return buffer != nullptr; }
};

struct Tensor {
  std::string id;     // opaque, unguessable; set by TensorStore::Commit
  std::string name;   // optional, user-chosen
  TensorOwner owner;  // tenant (visibility, quotas) and optional label
  DType dtype = DType::kF32;
  Shape shape;
  NamedSharding sharding = NamedSharding::SingleDevice(0);
  // Registered mesh the sharding uses; empty for implicit meshes (a single
  // device, or a "replica" mesh over explicit device ids).
  std::string mesh_id;
  std::vector<Shard> shards;  // one per mesh device, in mesh (row-major) order
  // The reduction combining the partial contributions when the sharding has
  // partial axes; nullopt otherwise.
  std::optional<ReduceOp> partial_op;
  // The owner-quota charge for this tensor's device bytes (TensorStore);
  // released when the Tensor is destroyed. Null when uncharged.
  std::shared_ptr<void> quota_charge;
  // In a cluster: the session of the daemon the tensor was created through
  // ("" = durable), carried in its record so every daemon lists it alike.
  std::string session_id;

  // Whether every shard is on this daemon.
  bool all_local() const {
    for (const Shard& s : shards) {
      if (!s.local()) return false;
    }
    return true;
  }

  int64_t logical_bytes() const { return ByteSize(dtype, shape); }
  int64_t device_bytes() const {
    int64_t total = 0;
    for (const Shard& s : shards) total += s.buffer ? s.buffer->size() : 0;
    return total;
  }
  // Device bytes over every shard, this daemon's and the others'.
  int64_t global_device_bytes() const {
    int64_t total = 0;
    for (const Shard& s : shards) total += BoxNumElements(s.domain.box) * DTypeSize(dtype);
    return total;
  }
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_TENSOR_TENSOR_H_
