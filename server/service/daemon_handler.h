// gRPC front for placement.v1.DaemonService (GetStatus, ListStreams).
#ifndef PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_
#define PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_

#include <functional>

#include "placement/v1/daemon_service.grpc.pb.h"
#include "server/cluster/cluster.h"
#include "server/daemon_identity.h"
#include "server/device/device_inventory.h"
#include "server/service/call_gate.h"
#include "server/service/stream_registry.h"

namespace placement::server {

// Live counts the status reports; each may be empty (reported as 0).
struct DaemonCounts {
  std::function<int64_t()> meshes;
  std::function<int64_t()> tensors;
  std::function<int64_t()> prefetch_streams;
  std::function<int64_t()> sessions;
  std::function<int64_t()> session_tensors;
  std::function<int64_t()> open_streams;
  std::function<int64_t()> regions;
  // ListStreams: the open streams (StreamRegistry::List); empty = none.
  std::function<std::vector<StreamSnapshot>()> streams;
};

class DaemonHandler final : public placement::v1::DaemonService::CallbackService {
 public:
  // `cluster` may be null (unit tests): the status then reports a lone
  // daemon.
  DaemonHandler(const DaemonIdentity* identity, const DeviceInventory* inventory,
                DaemonCounts counts, CallGate* gate, const Cluster* cluster = nullptr)
      : identity_(identity),
        inventory_(inventory),
        counts_(std::move(counts)),
        gate_(gate),
        cluster_(cluster) {}

  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const placement::v1::GetStatusRequest* request,
                                      placement::v1::GetStatusResponse* response) override;
  grpc::ServerUnaryReactor* ListStreams(grpc::CallbackServerContext* context,
                                        const placement::v1::ListStreamsRequest* request,
                                        placement::v1::ListStreamsResponse* response) override;

 private:
  const DaemonIdentity* identity_;
  const DeviceInventory* inventory_;
  DaemonCounts counts_;
  CallGate* gate_;
  const Cluster* cluster_;
};

}  // namespace placement::server

#endif  // PLACEMENT_SERVER_SERVICE_DAEMON_HANDLER_H_
