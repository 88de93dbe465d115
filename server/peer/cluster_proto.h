// Wire <-> core for the daemon-to-daemon services (cluster_service.proto,
// peer_service.proto): devices, cluster views, joins. Shared by the
// handlers (server/service/cluster_handler.*, peer_handler.*) and the
// clients that call them (coordinator_client.*, peer_client.*), so both
// ends convert the same way.
//
// Pure functions; thread-safe.
#ifndef PLACEMENT_SERVER_PEER_CLUSTER_PROTO_H_
#define PLACEMENT_SERVER_PEER_CLUSTER_PROTO_H_

#include "absl/time/time.h"
#include "google/protobuf/duration.pb.h"
#include "placement/v1/cluster_service.pb.h"
#include "placement/v1/types.pb.h"
#include "server/cluster/cluster_view.h"
#include "server/cluster/membership.h"
#include "server/device/device_inventory.h"

namespace placement::server {

absl::Duration DurationFromProto(const google::protobuf::Duration& d);
void DurationToProto(absl::Duration d, google::protobuf::Duration* out);

void DescriptionToProto(const DeviceDescription& d, placement::v1::Device* out);
DeviceDescription DescriptionFromProto(const placement::v1::Device& d);

placement::v1::ProcessState ProcessStateToProto(ProcessState state);
placement::v1::ClusterState ClusterStateToProto(ClusterState state);

void ViewToProto(const ClusterView& view, placement::v1::Topology* out);
ClusterView ViewFromProto(const placement::v1::Topology& topology);

void JoinInfoToProto(const JoinInfo& info, placement::v1::JoinRequest* out);
JoinInfo JoinInfoFromProto(const placement::v1::JoinRequest& request);

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_PEER_CLUSTER_PROTO_H_
