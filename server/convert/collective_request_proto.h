// Wire <-> core for a collective request: any of CollectiveService's five
// requests, as the CollectiveOp union of peer_service.proto, to and from the
// core's CollectiveRequest (server/collective/collective_request.h). The
// public handler converts what callers send; a daemon that drives a
// collective across daemons converts it back to the wire for
// PeerService.Prepare, and the participants' handler converts it again.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_CONVERT_COLLECTIVE_REQUEST_PROTO_H_
#define PLACEMENT_SERVER_CONVERT_COLLECTIVE_REQUEST_PROTO_H_

#include "absl/status/statusor.h"
#include "placement/v1/peer_service.pb.h"
#include "server/collective/collective_request.h"

namespace placement::server {

// INVALID_ARGUMENT naming the field: a controller outside the enum
// ("controller is 7; expected CONTROLLER_SINGLE (1) or CONTROLLER_MULTI
// (2)"), an empty tensor_id, a source outside the enum, a name longer than
// kMaxTensorNameLength, an unknown or contradictory op / op_name, an empty
// union ("the collective request is empty").
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(const placement::v1::CollectiveOp& op);
// The same for each request of the union (the public handler's, which
// needs no union).
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(
    const placement::v1::AllReduceRequest& request);
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(
    const placement::v1::AllReduceBatchRequest& request);
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(
    const placement::v1::AllGatherRequest& request);
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(
    const placement::v1::ReduceScatterRequest& request);
absl::StatusOr<CollectiveRequest> CollectiveRequestFromProto(
    const placement::v1::BroadcastRequest& request);

// Sets the request union of `out` (op as the enum, op_name empty); the
// other fields of `out` are left as they are.
void CollectiveRequestToProto(const CollectiveRequest& request, placement::v1::CollectiveOp* out);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_CONVERT_COLLECTIVE_REQUEST_PROTO_H_
