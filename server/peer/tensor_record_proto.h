// Wire <-> core for a tensor's record (peer_service.proto TensorRecord):
// what every daemon of a cluster holds of every tensor -- identity, owner,
// dtype, shape and the full sharding with its mesh inline -- so a record
// can be installed on a daemon that has none of the tensor's shards.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_PEER_TENSOR_RECORD_PROTO_H_
#define PLACEMENT_SERVER_PEER_TENSOR_RECORD_PROTO_H_

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "placement/v1/peer_service.pb.h"
#include "server/tensor/tensor.h"

namespace placement::server {

void RecordToProto(const Tensor& tensor, placement::v1::TensorRecord* out);

// A tensor with the record's metadata and one shard per mesh device, none
// holding a buffer; `process_of` names each shard's daemon. INVALID_ARGUMENT
// for a record whose mesh, sharding or shape does not hold together.
absl::StatusOr<std::unique_ptr<Tensor>> ShellFromRecord(
    const placement::v1::TensorRecord& record,
    const std::function<int32_t(int64_t device_id)>& process_of);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_TENSOR_RECORD_PROTO_H_
